"""The console's files are all installed with the package, and the page names only real ones."""

from __future__ import annotations

import re
import tomllib
from fnmatch import fnmatch
from pathlib import Path

from leasehold import console

ROOT = Path(__file__).parents[2]
STATIC = ROOT / "functions" / "leasehold" / "console" / "static"


def test_every_static_file_is_package_data_so_wheels_and_the_lambda_bundle_carry_it() -> None:
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    patterns = setuptools["package-data"]["leasehold.console"]
    files = sorted(p.relative_to(STATIC.parent).as_posix() for p in STATIC.iterdir())
    assert files and all(any(fnmatch(f, pattern) for pattern in patterns) for f in files)
    assert sorted(console.assets()) == sorted(p.name for p in STATIC.iterdir())


def test_the_page_and_its_modules_refer_only_to_files_the_console_serves() -> None:
    served = set(console.assets())
    page = console.assets()[console.INDEX].body.decode()
    referenced = set(re.findall(r'(?:src|href)="console/([^"]+)"', page))
    for asset in served:
        if asset.endswith(".js"):
            text = console.assets()[asset].body.decode()
            referenced |= set(re.findall(r'from "\./([^"]+)"', text))
    assert referenced and referenced <= served, referenced - served
    assert "app.js" in referenced and "style.css" in referenced
