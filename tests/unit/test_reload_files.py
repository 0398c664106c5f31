"""``leasehold dev --reload`` watches the code the tasks run: every file of the task module's
own package (its helpers too), never an installed package's tree."""

from __future__ import annotations

import importlib
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from leasehold.local.reload import Watcher, files_of


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    package = tmp_path / "reloadapp"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "helpers.py").write_text("GREETING = 'hello'\n")
    (package / "sub" / "__init__.py").write_text("")
    (package / "sub" / "util.py").write_text("")
    (package / "tasks.py").write_text("from reloadapp.helpers import GREETING\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.import_module("reloadapp.tasks")
    try:
        yield package
    finally:
        for name in [m for m in sys.modules if m.partition(".")[0] == "reloadapp"]:
            del sys.modules[name]


def test_a_helper_module_of_the_task_package_is_watched(project: Path) -> None:
    assert files_of(["reloadapp.tasks"]) == sorted(
        project / path for path in ("__init__.py", "helpers.py", "sub/__init__.py",
                                    "sub/util.py", "tasks.py"))
    watcher = Watcher(["reloadapp.tasks"])
    helper = project / "helpers.py"
    helper.write_text("GREETING = 'hi'\n")
    os.utime(helper, ns=(helper.stat().st_atime_ns, helper.stat().st_mtime_ns + 10**9))
    assert watcher.changed() == [helper]


def test_an_installed_package_is_not_watched_whole() -> None:
    # json is in the standard library: its one module, not the package's tree.
    assert files_of(["json.decoder"]) == [Path(json.decoder.__file__)]
