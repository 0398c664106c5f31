"""``make dev`` passes a port and other options through to ``leasehold dev`` (issue 14)."""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).parents[2]


def dev_command(*variables: str) -> str:
    """The command `make dev` would run (``make -n`` prints without running)."""
    # --no-print-directory: under `make test` this is a sub-make, which would say where it is.
    done = subprocess.run(["make", "--no-print-directory", "-n", "dev", *variables], cwd=ROOT,
                          capture_output=True, text=True, timeout=30, check=True)
    return done.stdout.strip().splitlines()[-1]


def test_make_dev_takes_a_port_and_arguments() -> None:
    assert dev_command().endswith("leasehold dev --port 8080")
    assert dev_command("PORT=9000", "ARGS=--fresh --workers 3").endswith(
        "leasehold dev --port 9000 --fresh --workers 3")
