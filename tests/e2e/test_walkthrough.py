"""README's "Your own tasks, from zero to AWS", run as written: each ``python`` block that
starts with ``# <path>`` is written to a fresh project folder; its tests pass under pytest;
``leasehold dev --tasks myapp.tasks --reload`` serves its task; and the application code
prints what its comments say, against that runtime, through ``$LEASEHOLD_URL``.

The steps that cannot run here are the placeholders (``leasehold init`` and the construct,
from another branch) and the AWS lines, which need an account.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import ROOT, start_runtime

pytestmark = pytest.mark.e2e

SECTION = "## Your own tasks, from zero to AWS"


def files(readme: str) -> dict[str, str]:
    """The section's ``python`` blocks by the path their first line names."""
    section = readme.split(SECTION, 1)[1].split("\n## ", 1)[0]
    found = {}
    for block in re.findall(r"```python\n(.*?)```", section, flags=re.S):
        first, _, _ = block.partition("\n")
        assert first.startswith("# "), f"a walk-through block names no file: {first!r}"
        found[first[2:].strip()] = block
    return found


def expected(source: str) -> list[str]:
    """What each ``print(...)  # text`` line of ``source`` says it prints, in order."""
    return [line.split("  # ", 1)[1] for line in source.splitlines()
            if line.lstrip().startswith("print(") and "  # " in line]


def test_the_walkthrough_runs_as_written(tmp_path: Path) -> None:
    project = files((ROOT / "README.md").read_text())
    assert {"myapp/tasks.py", "conftest.py", "tests/test_tasks.py", "app.py"} <= set(project)
    for name, text in project.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    path = os.pathsep.join([str(tmp_path), str(ROOT / "functions"), str(ROOT)])
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("LEASEHOLD_") and k != "AWS_ENDPOINT_URL"}
    env["PYTHONPATH"] = path

    # Step 3: the project's own tests.
    tests = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                            "-p", "no:randomly", "tests/"], cwd=tmp_path, env=env,
                           capture_output=True, text=True, timeout=180, check=False)
    assert tests.returncode == 0, tests.stdout[-3000:] + tests.stderr[-2000:]
    assert "3 passed" in tests.stdout

    # Step 4: the runtime with the project's tasks; step 5: the application against it.
    runtime = start_runtime("--tasks", "myapp.tasks", "--reload", "--workers", "1",
                            env={"PYTHONPATH": path})
    try:
        export = next(line.split("export ", 1)[1].split()[0] for line in runtime.output
                      if "export LEASEHOLD_URL=" in line)
        url = export.split("=", 1)[1]
        assert url == runtime.url
        for script in sorted(name for name in project if name.startswith("app")):
            done = subprocess.run([sys.executable, script], cwd=tmp_path,
                                  env={**env, "LEASEHOLD_URL": url}, capture_output=True,
                                  text=True, timeout=120, check=False)
            assert done.returncode == 0, done.stderr[-3000:]
            assert done.stdout.splitlines() == expected(project[script]), done.stdout
    finally:
        assert runtime.stop() == 0, "".join(runtime.output[-30:])
