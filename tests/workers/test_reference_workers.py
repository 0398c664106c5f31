"""The reference workers' own tests (issue 34): TypeScript's ``npm test`` and Java's ``test.sh``.

Each runs its worker against a fake API in its own language (lease -> complete, heartbeats,
cancel and 409 lease_lost report nothing, a 413 falls back to fail PayloadTooLarge,
errors -> fail, SIGTERM drains and exits 0); the
conformance suite (tests/conformance) runs the same workers against ``leasehold dev``. A
missing toolchain or an unbuilt worker fails with how to fix it: these tests never skip.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

WORKERS = Path(__file__).parents[2] / "workers"


def run(command: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    assert shutil.which(command[0]), f"{command[0]} is missing: `make workers` installs it"
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=120)


def test_typescript_worker_passes_its_tests() -> None:
    folder = WORKERS / "typescript"
    assert (folder / "node_modules" / "typescript").is_dir(), \
        "workers/typescript has no node_modules: run `make workers` (npm ci)"
    done = run(["npm", "test", "--silent"], folder)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "# fail 0" in done.stdout and "# pass 9" in done.stdout, done.stdout


def test_java_worker_passes_its_tests() -> None:
    assert shutil.which("javac"), "javac is not installed: `make workers` installs a JDK"
    done = run([str(WORKERS / "java" / "test.sh")], WORKERS / "java")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "all 12 passed" in done.stdout, done.stdout
