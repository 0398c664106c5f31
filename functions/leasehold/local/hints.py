"""What the ``leasehold dev`` banner tells a newcomer: the exact ``export LEASEHOLD_URL=...``
for another shell, and how to call this installation's CLI (``make dev`` puts it in
``.venv/bin``, which is not on ``PATH`` until the venv is activated)."""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from pathlib import Path


def export_line(url: str) -> str:
    return f"export LEASEHOLD_URL={shlex.quote(url)}"


def cli_command(executable: str = sys.executable, cwd: str | None = None) -> str:
    """How to run the ``leasehold`` command that belongs to this interpreter."""
    script = Path(executable).parent / "leasehold"
    if not script.exists():
        return f"{shlex.quote(executable)} -m leasehold.cli"
    found = shutil.which("leasehold")
    if found is not None and Path(found).resolve() == script.resolve():
        return "leasehold"
    return shlex.quote(_shortest(script, cwd or os.getcwd()))


def cli_line(executable: str = sys.executable, cwd: str | None = None) -> str:
    command = cli_command(executable, cwd)
    if command == "leasehold":
        return "leasehold COMMAND   (leasehold --help)"
    activate = Path(executable).parent / "activate"
    line = f"{command} COMMAND   ({command} --help)"
    if activate.exists():
        line += f"; or `source {_shortest(activate, cwd or os.getcwd())}` once, then leasehold"
    return line


def _shortest(path: Path, cwd: str) -> str:
    """``.venv/bin/leasehold`` under the working directory, else the absolute path."""
    try:
        relative = path.relative_to(Path(cwd))
    except ValueError:
        return str(path)
    return str(relative)
