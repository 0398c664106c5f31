"""The documentation site (issue 47): ``mkdocs build --strict`` builds it from docs/ with its
generated reference pages (a broken link, a page missing from the navigation or a missing
anchor fails), and the README stays a short front page whose links all land on the site."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_site_builds_strictly_with_its_generated_references(tmp_path: Path) -> None:
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, check=False, timeout=300,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert built.returncode == 0, built.stderr[-4000:]
    cli = (tmp_path / "reference" / "cli" / "index.html").read_text()
    # Every command of the parser has its section, with its own --help.
    for command in ("init", "dev", "submit", "list", "jobs bulk", "schedules create",
                    "conformance"):
        assert f"leasehold {command}</code>" in cli, command
    http = (tmp_path / "reference" / "http" / "index.html").read_text()
    assert "GET /healthz" in http and "POST /jobs" in http and "POST /workers/lease" in http
    config = (tmp_path / "reference" / "config" / "index.html").read_text()
    assert "retention_days" in config and "PoolConfig" in config
    concepts = (tmp_path / "concepts" / "index.html").read_text()
    assert "stateDiagram-v2" in concepts and "RUNNING --&gt; SLEEPING" in concepts
    # The Python API from the code's own signatures and docstrings: every public name of
    # each module, a class's methods (the client's mixins' too), leasehold.errors' classes.
    python = (tmp_path / "reference" / "python" / "index.html").read_text()
    import leasehold
    import leasehold.client
    import leasehold.testing
    for name in [*leasehold.__all__, *leasehold.client.__all__, *leasehold.testing.__all__,
                 "LocalLeasehold", "InvalidInput", "Fenced"]:
        assert f'<h3 id="{name.lower()}' in python, name
    assert "Client.create_schedule" in python and "JobHandle.result" in python
    text = re.sub(r"<[^>]+>", "", python)  # code is highlighted token by token
    assert "min_backoff_seconds: float = 1.0" in text  # RetryPolicy's signature
    assert "Wait for the job to finish and return its result." in python  # a docstring


def test_the_readme_is_short_and_its_links_land_on_pages_that_exist() -> None:
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 200
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", readme)
    local = [link for link in links if not link.startswith(("http://", "https://"))]
    assert len(local) > 20
    assert [link for link in local if not (ROOT / link).is_file()] == []
