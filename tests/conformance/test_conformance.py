"""The conformance kit's cases against every reference worker (docs/protocol.md, "The
conformance task set"): the same cases ``leasehold conformance --worker CMD`` runs, not a
second copy. The concurrency scenario runs all three languages side by side. A fourth worker,
written in Perl from docs/protocol.md alone (tests/conformance/cleanroom, issue 45), runs them
too: it is what says the page is enough to write a conforming worker."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from leasehold.conformance.cases import CASES, Case, Run, lines
from leasehold.conformance.server import Server
from leasehold.conformance.workers import Workers
from tests.conformance.conftest import ENV, LANGUAGES, REFERENCE, ROOT, workers_of

pytestmark = pytest.mark.e2e


@pytest.fixture
def stop_after() -> Iterator[list[Workers]]:
    started: list[Workers] = []
    yield started
    for workers in started:
        workers.stop_all()


class Conforms:
    """The kit's cases against one worker. A class per language, so that ``--dist loadscope``
    spreads the languages over the test processes (each starts its own runtime) instead of
    running every language's cases one after another in one."""

    language: str
    #: The language its results must name (a reference worker's, or the clean-room one's).
    named = True

    def workers(self, runtime: Server) -> Workers:
        return workers_of(runtime, self.language)

    @pytest.mark.parametrize("case", CASES, ids=lambda case: case.name)
    def test_the_worker_conforms(self, runtime: Server, stop_after: list[Workers],
                                 tmp_path: Path, case: Case) -> None:
        workers = self.workers(runtime)
        stop_after.append(workers)
        case.check(Run(runtime, workers, tmp_path / "conformance.log", tmp_path,
                       self.language if self.named else None))


class TestPython(Conforms):
    language = "python"


class TestTypeScript(Conforms):
    language = "typescript"


class TestJava(Conforms):
    language = "java"


if "custom" in LANGUAGES:
    class TestCustom(Conforms):
        language = "custom"
        named = False


#: The clean-room worker: Perl 5 with core modules only, written from docs/protocol.md alone
#: (its gaps are tests/conformance/cleanroom/NOTES.md). Run from the repository root.
CLEANROOM = ["perl", "tests/conformance/cleanroom/worker.pl"]


class TestCleanroomPerl(Conforms):
    language = "perl"

    def workers(self, runtime: Server) -> Workers:
        if shutil.which("perl") is None:
            pytest.fail("perl is not installed: the clean-room worker's conformance cannot "
                        "be checked")
        return Workers(runtime, CLEANROOM, "perl", cwd=str(ROOT), env=ENV)


def test_a_concurrency_key_holds_across_languages(runtime: Server, stop_after: list[Workers],
                                                  tmp_path: Path) -> None:
    log = tmp_path / "conformance.log"
    for language in REFERENCE:
        workers = workers_of(runtime, language)
        stop_after.append(workers)
        workers.start()
    ids = [runtime.submit("conformance.sleep", {"seconds": 0.5, "log": str(log)},
                          concurrency={"key": "shared", "limit": 2}) for _ in range(10)]
    jobs = runtime.wait_for(ids, timeout=60)
    assert {j["state"] for j in jobs.values()} == {"SUCCEEDED"}
    running, most = 0, 0
    events = sorted((int(line[4]), 0 if line[0] == "end" else 1) for line in lines(log)
                    if line[0] in ("start", "end"))
    for _, starting in events:  # an end at the same millisecond counts first
        running += 1 if starting else -1
        most = max(most, running)
    assert most <= 2 and len(events) == 20
