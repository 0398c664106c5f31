"""The conformance kit (``leasehold.conformance``) against the reference workers.

One ``leasehold dev`` per module with the conformance tasks external in pool ``conf``
(:func:`leasehold.conformance.server.start`); each worker is its language's reference
worker, started as docs/protocol.md ("The conformance task set") says. A language whose
command is not there fails (never skips): the suite is what says a worker conforms.
"""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from leasehold.conformance import server as servers
from leasehold.conformance.server import Server
from leasehold.conformance.workers import Workers

ROOT = Path(__file__).parents[2]
#: How each language's reference worker is started (from the repository root), and what
#: must exist first (a built file).
COMMANDS: dict[str, tuple[list[str], Path | None]] = {
    "python": ([sys.executable, "-m", "leasehold.conformance.python_worker"], None),
    "typescript": (["node", "workers/typescript/dist/conformance.js"],
                   ROOT / "workers/typescript/dist/conformance.js"),
    "java": (["java", "-cp", "workers/java/build/leasehold-worker.jar", "leasehold.Conformance"],
             ROOT / "workers/java/build/leasehold-worker.jar"),
}
#: A fourth language: its command (``LEASEHOLD_CONFORMANCE_COMMAND="./my-worker --flag"``);
#: ``leasehold conformance --worker`` runs the same cases.
EXTRA = os.environ.get("LEASEHOLD_CONFORMANCE_COMMAND", "")
REFERENCE = ("python", "typescript", "java")
LANGUAGES = [*REFERENCE, *(["custom"] if EXTRA else [])]
ENV = {"PYTHONPATH": os.pathsep.join([str(ROOT / "functions"), str(ROOT)])}


def command_for(language: str) -> list[str]:
    if language == "custom":
        return shlex.split(EXTRA)
    command, needs = COMMANDS[language]
    if needs is not None and not needs.exists():
        build = {"typescript": "cd workers/typescript && npm run build",
                 "java": "workers/java/build.sh"}[language]
        pytest.fail(f"the {language} reference worker is not built: {needs} is missing "
                    f"(build it with `{build}`); its conformance cannot be checked")
    return command


def workers_of(server: Server, language: str) -> Workers:
    return Workers(server, command_for(language), language, cwd=str(ROOT), env=ENV)


@pytest.fixture(scope="module")
def runtime() -> Iterator[Server]:
    started = servers.start()
    yield started
    started.stop()
