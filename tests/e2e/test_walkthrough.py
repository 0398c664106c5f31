"""The site's "Your own tasks, from zero to AWS" (docs/guides/your-project.md), run as written:
``leasehold init myapp --package myapp`` makes the project and its example tests pass; each
``python`` block that starts with ``# <path>`` is then written over it; its tests pass under pytest;
``leasehold dev --tasks myapp.tasks --reload`` serves its task; the application code prints what its
comments say, against that runtime, through ``$LEASEHOLD_URL``; and init's CDK app is still there,
with the line step 6 tells the reader to change.

What cannot run here is the deploy itself and the AWS lines, which need an account (the
construct's synth from an init project is ``tests/e2e/test_init_venv.py``'s).
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

#: The site's "Your own tasks, from zero to AWS" (once a section of the README).
PAGE = ROOT / "docs" / "guides" / "your-project.md"


def files(section: str) -> dict[str, str]:
    """The page's ``python`` blocks by the path their first line names."""
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


def pytest_in(folder: Path, env: dict[str, str]) -> str:
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "-p", "no:randomly", "tests/"], cwd=folder, env=env,
                          capture_output=True, text=True, timeout=180, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    return done.stdout


def test_the_walkthrough_runs_as_written(tmp_path: Path) -> None:
    readme = PAGE.read_text()
    project = files(readme)
    assert {"myapp/tasks.py", "conftest.py", "tests/test_tasks.py", "main.py"} <= set(project)
    # The application's code never overwrites init's CDK app.
    assert "app.py" not in project
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("LEASEHOLD_") and k != "AWS_ENDPOINT_URL"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "functions"), str(ROOT)])

    # Step 1: `leasehold init myapp --package myapp`, and its three example tests pass.
    subprocess.run([sys.executable, "-m", "leasehold.cli", "init", "myapp", "--package",
                    "myapp"], cwd=tmp_path, env=env, check=True, capture_output=True,
                   timeout=60)
    home = tmp_path / "myapp"
    # What step 1's comment lists, inside the project folder.
    assert all((home / name).is_file() for name in (
        "myapp/tasks.py", "tests/test_tasks.py", "app.py", "cdk.json", "requirements.txt",
        "requirements-dev.txt"))
    assert "3 passed" in pytest_in(home, env)
    cdk_app = (home / "app.py").read_text()

    # Steps 2, 3 and 5: the README's files, written over init's.
    for name, text in project.items():
        (home / name).parent.mkdir(parents=True, exist_ok=True)
        (home / name).write_text(text)
    path = os.pathsep.join([str(home), str(ROOT / "functions"), str(ROOT)])
    env["PYTHONPATH"] = path

    # Step 3: the project's own tests.
    assert "4 passed" in pytest_in(home, env)

    # Step 4: the runtime with the project's tasks; step 5: the application against it.
    runtime = start_runtime("--tasks", "myapp.tasks", "--reload", "--workers", "1",
                            env={"PYTHONPATH": path})
    try:
        export = next(line.split("export ", 1)[1].split()[0] for line in runtime.output
                      if "export LEASEHOLD_URL=" in line)
        url = export.split("=", 1)[1]
        assert url == runtime.url
        for script in sorted(name for name in project if name.startswith("main")):
            done = subprocess.run([sys.executable, script], cwd=home,
                                  env={**env, "LEASEHOLD_URL": url}, capture_output=True,
                                  text=True, timeout=120, check=False)
            assert done.returncode == 0, done.stderr[-3000:]
            assert done.stdout.splitlines() == expected(project[script]), done.stdout
    finally:
        assert runtime.stop() == 0, "".join(runtime.output[-30:])

    # Step 6: init's CDK app is untouched, and holds the line the README says to replace.
    assert (home / "app.py").read_text() == cdk_app
    old, new = 'required_tasks=["myapp.describe"]', 'required_tasks=["welcome-email"]'
    assert f"replace init's `{old}`" in " ".join(readme.split()) and old in cdk_app
    assert f"`{new}`" in readme


#: The site's "Testing your tasks" (once a section of the README).
TESTING = ROOT / "docs" / "guides" / "testing.md"


def test_the_testing_section_runs_as_written(tmp_path: Path) -> None:
    """The site's "Testing your tasks" (docs/guides/testing.md): its conftest and its tests
    pass under pytest, in a folder of their own (the test clock, ``leasehold.advance``, the
    application's own ``Client()``)."""
    section = TESTING.read_text()
    conftest, tests = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    (tmp_path / "conftest.py").write_text(conftest)
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_reminders.py").write_text(tests)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("LEASEHOLD_") and k != "AWS_ENDPOINT_URL"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "functions"), str(ROOT)])
    assert "2 passed" in pytest_in(tmp_path, env)
