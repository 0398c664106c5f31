"""A project from ``leasehold init`` runs in a fresh virtualenv made from its own
requirements files, exactly as the README's "Your own tasks" says: ``python3 -m venv .venv``,
``pip install -r requirements-dev.txt``, ``pytest``, ``leasehold dev``, and a job through it.
Nothing of this checkout's interpreter is borrowed (the walkthrough test uses it, which is how
a missing emulator dependency went unseen).

pip reads only local wheels (``--no-index``): every distribution the requirements need is
built or downloaded once into ``~/.cache/leasehold/wheels/<hash of pyproject.toml>`` (changed
requirements make a new one), and ``PIP_FIND_LINKS`` adds its folders.
"""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from leasehold.client import Client

from .conftest import ROOT, Runtime

#: The fixtures build the wheels (first run only) and install a whole virtualenv with pip
#: (tens of wheels, aws-cdk-lib's among them), which on a loaded machine outlasts pytest's
#: default 300 s although each pip is given 900 s below: the first test's limit is the sum
#: of its pips' and its own, so a slow install is never cut short and reported as a hang.
pytestmark = [pytest.mark.e2e, pytest.mark.timeout(2 * 900 + 300)]

CACHE = Path.home() / ".cache" / "leasehold" / "wheels"


def requirements_hash() -> str:
    """What decides the wheels: Leasehold's requirements (``pyproject.toml``). Leasehold
    itself is installed from this checkout (editable, as the scaffold's requirements say), so
    an edit of its code needs no new wheels."""
    return hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()[:16]


@pytest.fixture(scope="session")
def wheels() -> Path:
    """Wheels of this Leasehold (with its ``infra`` and ``local`` extras), of everything they
    need, of pytest and humanize (the scaffold's) and of the editable build's backend."""
    folder = CACHE / f"{sys.version_info.major}{sys.version_info.minor}-{requirements_hash()}"
    if not (folder / ".complete").is_file():
        folder.mkdir(parents=True, exist_ok=True)
        built = subprocess.run(
            [sys.executable, "-m", "pip", "wheel", "--quiet", "--disable-pip-version-check",
             "--wheel-dir", str(folder), f"{ROOT}[infra,local]", "pytest>=8", "humanize>=4,<5",
             "setuptools>=77", "wheel"],
            capture_output=True, text=True, check=False, timeout=900)
        assert built.returncode == 0, built.stderr[-3000:]
        (folder / ".complete").write_text("")
    return folder


def in_venv(venv: Path) -> dict[str, str]:
    """The environment of a shell after ``. .venv/bin/activate``: nothing of this checkout."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["VIRTUAL_ENV"] = str(venv)
    return env


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory, wheels: Path) -> Iterator[Path]:
    """One project and its virtualenv for the module (installing it takes most of the time);
    the test that takes moto out of it runs last."""
    tmp_path = tmp_path_factory.mktemp("project")
    assert not tmp_path.resolve().is_relative_to(ROOT)
    created = subprocess.run([sys.executable, "-m", "leasehold.cli", "init", "myapp",
                              "--package", "myapp"], cwd=tmp_path, capture_output=True,
                             text=True, check=False)
    assert created.returncode == 0, created.stderr
    folder = tmp_path / "myapp"
    venv = folder / ".venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, cwd=folder)
    links = " ".join(filter(None, [str(wheels), os.environ.get("PIP_FIND_LINKS", "")]))
    installed = subprocess.run(
        ["pip", "install", "--quiet", "--disable-pip-version-check", "-r",
         "requirements-dev.txt"], cwd=folder, capture_output=True, text=True, check=False,
        # No bytecode compiled at install (pip's default): it took most of the install's
        # time here, and Python compiles what it imports anyway.
        env={**in_venv(venv), "PIP_FIND_LINKS": links, "PIP_NO_INDEX": "1",
             "PIP_NO_COMPILE": "1"}, timeout=900)
    assert installed.returncode == 0, installed.stderr[-3000:]
    yield folder


def start_dev(project: Path) -> Runtime:
    process = subprocess.Popen(
        ["leasehold", "dev", "--tasks", "myapp.tasks", "--port", "0", "--workers", "1"],
        cwd=project, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env=in_venv(project / ".venv"))
    runtime = Runtime(process)
    assert process.stdout is not None
    deadline = time.monotonic() + 60
    for line in process.stdout:
        runtime.output.append(line)
        if line.strip().startswith("API:"):
            runtime.url = line.split()[1]
        if line.startswith("Press Ctrl-C") or time.monotonic() > deadline:
            break
    if not runtime.url:
        process.send_signal(signal.SIGINT)
        process.kill()
        raise AssertionError("leasehold dev did not start:\n" + "".join(runtime.output))
    return runtime


def test_a_new_project_runs_its_tests_and_its_runtime_from_its_own_virtualenv(
        project: Path) -> None:
    venv = project / ".venv"
    where = subprocess.run([str(venv / "bin" / "python"), "-c",
                            "import leasehold, moto; print(leasehold.__file__)"],
                           capture_output=True, text=True, check=False, env=in_venv(venv))
    assert where.returncode == 0, where.stderr

    tested = subprocess.run(["pytest", "-q", "-p", "no:cacheprovider"], cwd=project,
                            capture_output=True, text=True, check=False,
                            env=in_venv(venv), timeout=300)
    assert tested.returncode == 0, tested.stdout[-3000:]
    assert "3 passed" in tested.stdout

    runtime = start_dev(project)
    try:
        job = Client(url=runtime.url).submit("myapp.describe",
                                             {"name": "report.pdf", "bytes": 1_500_000})
        assert job.result(timeout=60) == {"name": "report.pdf", "size": "1.5 MB"}
    finally:
        assert runtime.stop() == 0, "".join(runtime.output[-30:])


def test_without_the_emulator_leasehold_dev_says_what_is_missing(project: Path) -> None:
    venv = project / ".venv"
    subprocess.run(["pip", "uninstall", "--quiet", "--yes", "moto"], check=True,
                   env=in_venv(venv), capture_output=True)
    said = subprocess.run(["leasehold", "dev", "--tasks", "myapp.tasks", "--port", "0"],
                          cwd=project, capture_output=True, text=True, check=False,
                          env=in_venv(venv), timeout=60)
    assert said.returncode != 0
    assert "the embedded AWS emulator needs moto" in said.stdout + said.stderr
    assert "leasehold[local]" in said.stdout + said.stderr
