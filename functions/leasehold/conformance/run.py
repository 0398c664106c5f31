"""Running the cases against one worker command, one line per case and a summary."""

from __future__ import annotations

import shutil
import tempfile
import time
import traceback
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from leasehold.conformance import server as servers
from leasehold.conformance.cases import Case, Run, selected
from leasehold.conformance.server import CaseFailed, Server
from leasehold.conformance.workers import Workers


@dataclass(frozen=True)
class Outcome:
    case: str
    status: str  # "pass", "fail" or "excluded"
    reason: str = ""
    seconds: float = 0.0


def run_case(case: Case, server: Server, command: Sequence[str], *, language: str | None,
             cwd: str | None = None) -> Outcome:
    """One case against fresh workers of ``command``: pass, or fail with the reason."""
    scratch = Path(tempfile.mkdtemp(prefix=f"leasehold-conformance-{case.name}-"))
    workers = Workers(server, command, language or "worker", cwd=cwd)
    started = time.monotonic()
    try:
        case.check(Run(server, workers, scratch / "conformance.log", scratch, language))
    except CaseFailed as failed:
        return Outcome(case.name, "fail", str(failed), time.monotonic() - started)
    except Exception as exc:  # the kit's own trouble, said as such
        return Outcome(case.name, "fail", "".join(traceback.format_exception_only(exc)).strip(),
                       time.monotonic() - started)
    finally:
        workers.stop_all()
        shutil.rmtree(scratch, ignore_errors=True)
    return Outcome(case.name, "pass", "", time.monotonic() - started)


def run(command: Sequence[str], *, exclude: Sequence[str] = (), out: TextIO,
        language: str | None = None, cwd: str | None = None) -> int:
    """Every case (but ``exclude``) against ``command``; 0 when none failed, else 1."""
    plan = selected(exclude)
    server = servers.start()
    outcomes: list[Outcome] = []
    try:
        for case, runs in plan:
            if not runs:
                outcome = Outcome(case.name, "excluded", "--exclude")
            else:
                outcome = run_case(case, server, command, language=language, cwd=cwd)
            outcomes.append(outcome)
            said = f" ({outcome.seconds:.1f} s)" if outcome.status != "excluded" else ""
            reason = f": {outcome.reason}" if outcome.reason else ""
            print(f"{outcome.status:<8} {case.name}{said}{reason}", file=out, flush=True)
    finally:
        server.stop()
    counts = {status: sum(o.status == status for o in outcomes)
              for status in ("pass", "fail", "excluded")}
    print(f"{counts['pass']} passed, {counts['fail']} failed, {counts['excluded']} excluded "
          f"of {len(outcomes)} cases", file=out, flush=True)
    return 1 if counts["fail"] else 0


__all__ = ["Outcome", "run", "run_case"]
