"""The conformance cases: what a worker that follows docs/protocol.md does, checked through
the server's API and the task set's log (docs/protocol.md, "The conformance task set").

Each case gets a :class:`Run` (the server, the worker command's launcher, a fresh log file)
and raises :class:`~leasehold.conformance.server.CaseFailed` when the worker does not
conform. A case starts the workers it needs and the kit stops them after it.
"""

from __future__ import annotations

import secrets
import signal
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from leasehold.conformance.proxy import LosingProxy
from leasehold.conformance.server import UNASKED, CaseFailed, Server, check
from leasehold.conformance.workers import Workers


@dataclass(frozen=True)
class Run:
    server: Server
    workers: Workers
    log: Path
    scratch: Path
    #: The language the results must name (a reference worker's); None: any word.
    language: str | None = None


@dataclass(frozen=True)
class Case:
    name: str
    check: Callable[[Run], None]
    #: What it shows, one line (printed with ``--list``).
    about: str


def lines(path: Path) -> list[list[str]]:
    """The log's lines, each ``[event, job_id, language, worker_id, epoch_ms]``."""
    if not path.exists():
        return []
    return [line.split() for line in path.read_text().splitlines() if line.strip()]


def started_by(log: Path, job_id: str) -> list[str]:
    return [line[3] for line in lines(log) if line[0] == "start" and line[1] == job_id]


def wait_until(predicate: Callable[[], object], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise CaseFailed(f"timed out after {timeout:g} s waiting for {what}")


def named(run: Run, result: Any) -> dict[str, Any]:
    """``result`` without its ``language``, once that is checked: a reference worker's own
    name, any other worker's any non-empty word."""
    check(isinstance(result, dict), f"the result is not an object: {result!r}")
    said = result.get("language")
    if run.language is not None:
        check(said == run.language, f"language {said!r}, not {run.language!r}")
    else:
        check(isinstance(said, str) and said and " " not in said,
              f"language must be a non-empty word, got {said!r}")
    return {k: v for k, v in result.items() if k != "language"}


def equal(got: object, expected: object, what: str) -> None:
    check(got == expected, f"{what}: got {got!r}, expected {expected!r}")


#: The echo result's trace context keys, checked by the ``trace-context`` case only.
TRACE_KEYS = ("traceparent", "tracestate")


def untraced(result: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in result.items() if k not in TRACE_KEYS}


# -- the cases ------------------------------------------------------------------------------

def lease_and_finish(run: Run) -> None:
    worker = run.workers.start()
    job_id = run.server.submit("conformance.echo", {"x": [1, "two"]})
    job = run.server.wait_for([job_id])[job_id]
    equal(job["state"], "SUCCEEDED", "state")
    equal(untraced(named(run, job["result"])),
          {"echo": {"x": [1, "two"]}, "worker_id": worker.worker_id, "attempt": 1}, "result")


def retries_to_dead_and_non_retryable(run: Run) -> None:
    run.workers.start()
    server = run.server
    retry = {"min_backoff_seconds": 0, "max_backoff_seconds": 0}
    job_id = server.submit("conformance.fail", {"message": "nope"}, max_attempts=2, retry=retry)
    job = server.wait_for([job_id])[job_id]
    equal((job["state"], job["attempts"]), ("DEAD", 2), "state, attempts")
    equal((job["error"]["type"], job["error"]["message"]), ("ConformanceError", "nope"), "error")
    final = server.submit("conformance.fail", {"retryable": False}, max_attempts=5)
    job = server.wait_for([final])[final]
    equal((job["state"], job["attempts"], job["error"]["message"]), ("DEAD", 1, "boom"),
          "a non-retryable failure")
    # A redrive re-runs from scratch (attempts start again).
    redriven = server.submit("conformance.fail", {"succeed_on_attempt": 2}, max_attempts=1)
    equal(server.wait_for([redriven])[redriven]["state"], "DEAD", "state before the redrive")
    equal(server.call("POST", f"/jobs/{redriven}/retry").status, 200, "the retry's status")
    job = server.wait_for([redriven])[redriven]
    equal((job["state"], job["attempts"]), ("DEAD", 1), "re-run from attempt 1")


def heartbeats_extend_the_lease(run: Run) -> None:
    worker = run.workers.start()
    # 3.5 s: past the 2 s lease and the 1 s skew grace, so only heartbeats keep it.
    job_id = run.server.submit("conformance.sleep", {"seconds": 3.5, "log": str(run.log)})
    job = run.server.wait_for([job_id])[job_id]
    equal((job["state"], job["attempts"]), ("SUCCEEDED", 1), "state, attempts")
    equal(named(run, job["result"]), {"slept": 3.5, "worker_id": worker.worker_id}, "result")
    equal(started_by(run.log, job_id), [worker.worker_id], "started by")


def a_zombie_s_finish_is_refused(run: Run) -> None:
    first = run.workers.start()
    job_id = run.server.submit("conformance.sleep", {"seconds": 2.5, "log": str(run.log)})
    wait_until(lambda: started_by(run.log, job_id), 10, "the first start")
    first.signal(signal.SIGSTOP)  # it misses its heartbeats: the lease is taken over
    second = run.workers.start()
    wait_until(lambda: len(started_by(run.log, job_id)) == 2, 15, "the takeover")
    first.signal(signal.SIGCONT)  # its late heartbeat or finish gets 409
    job = run.server.wait_for([job_id])[job_id]
    equal((job["state"], job["attempts"]), ("SUCCEEDED", 2), "state, attempts")
    equal(job["result"]["worker_id"], second.worker_id, "the result's worker")
    time.sleep(1.0)  # whatever the first worker still sends changes nothing
    equal(run.server.job(job_id)["result"]["worker_id"], second.worker_id,
          "the result's worker, later")


def cancel_ends_the_job_within_seconds(run: Run) -> None:
    worker = run.workers.start()
    job_id = run.server.submit("conformance.sleep", {"seconds": 20, "log": str(run.log)})
    wait_until(lambda: started_by(run.log, job_id), 10, "the start")
    equal(run.server.call("DELETE", f"/jobs/{job_id}").status, 200, "the cancel's status")
    job = run.server.wait_for([job_id], timeout=5)[job_id]
    equal(job["state"], "CANCELLED", "state")
    wait_until(lambda: any(line[0] == "cancelled" and line[1] == job_id
                           and line[3] == worker.worker_id for line in lines(run.log)),
               5, "the task to stop (a `cancelled` log line)")


def sigterm_drains(run: Run) -> None:
    worker = run.workers.start()
    ids = [run.server.submit("conformance.sleep", {"seconds": 1.5, "log": str(run.log)})
           for _ in range(2)]
    wait_until(lambda: all(started_by(run.log, j) for j in ids), 10, "both starts")
    worker.signal(signal.SIGTERM)
    try:
        code = worker.process.wait(20)
    except Exception as exc:
        raise CaseFailed("the worker did not exit within 20 s of SIGTERM") from exc
    equal(code, 0, "the exit status after SIGTERM")
    equal([run.server.job(j)["state"] for j in ids], ["SUCCEEDED", "SUCCEEDED"],
          "the jobs in hand (none left RUNNING)")


def a_killed_worker_s_job_runs_again(run: Run) -> None:
    first = run.workers.start()
    job_id = run.server.submit("conformance.sleep", {"seconds": 2, "log": str(run.log)})
    wait_until(lambda: started_by(run.log, job_id), 10, "the start")
    first.signal(signal.SIGKILL)
    first.process.wait()
    second = run.workers.start()
    job = run.server.wait_for([job_id])[job_id]
    equal((job["state"], job["attempts"]), ("SUCCEEDED", 2), "state, attempts")
    equal(started_by(run.log, job_id), [first.worker_id, second.worker_id], "started by")


def priorities_and_fairness(run: Run) -> None:
    server, log = run.server, run.log
    low = [server.submit("conformance.echo", {"log": str(log)}, priority="low")
           for _ in range(2)]
    high = [server.submit("conformance.echo", {"log": str(log)}, priority="high")
            for _ in range(2)]
    one = run.workers.start(max_jobs=1)
    server.wait_for(low + high)
    order = [line[1] for line in lines(log) if line[0] == "start"]
    check(set(order[:2]) == set(high) and set(order[2:]) == set(low),
          f"high priority first: started {order}, high {high}")
    one.stop()
    # A quiet tenant's job submitted after a noisy tenant's backlog does not wait behind all
    # of it (FIFO would start it last).
    fair = run.scratch / "fair.log"
    noisy = [server.submit("conformance.sleep", {"seconds": 0.3, "log": str(fair)},
                           tenant="noisy") for _ in range(6)]
    quiet = server.submit("conformance.sleep", {"seconds": 0.3, "log": str(fair)},
                          tenant="quiet")
    run.workers.start(max_jobs=4)
    server.wait_for(noisy, tenant="noisy")
    server.wait_for([quiet], tenant="quiet")
    order = [line[1] for line in lines(fair) if line[0] == "start"]
    check(order.index(quiet) < max(order.index(n) for n in noisy[4:]),
          f"the quiet tenant's job waited behind the whole backlog: {order}")


def an_unasked_task_is_never_given(run: Run) -> None:
    unasked = run.server.submit(UNASKED, {})
    run.workers.start()
    job_id = run.server.submit("conformance.echo", {"log": str(run.log)})
    run.server.wait_for([job_id])
    time.sleep(1.0)  # a few more polls
    equal(run.server.job(unasked)["state"], "QUEUED", f"the {UNASKED} job")


def a_timeout_ends_the_attempt(run: Run) -> None:
    run.workers.start()
    job_id = run.server.submit("conformance.sleep", {"seconds": 10, "log": str(run.log)},
                               timeout_seconds=1, max_attempts=1)
    job = run.server.wait_for([job_id], timeout=15)[job_id]
    equal((job["state"], (job["error"] or {}).get("type")), ("DEAD", "AttemptTimeout"),
          "state, error")
    wait_until(lambda: any(line[0] == "cancelled" and line[1] == job_id
                           for line in lines(run.log)),
               5, "the task to stop once told (a `cancelled` log line)")


def a_result_over_the_limit_ends_payload_too_large(run: Run) -> None:
    run.workers.start()
    job_id = run.server.submit("conformance.echo", {"blob": "x" * (100 * 1024)},
                               max_attempts=3)
    job = run.server.wait_for([job_id])[job_id]
    equal((job["state"], job["attempts"], (job["error"] or {}).get("type")),
          ("DEAD", 1, "PayloadTooLarge"), "state, attempts, error")


def a_lost_finish_answer_is_sent_again(run: Run) -> None:
    proxy = LosingProxy(run.server.url, lose="/complete")
    try:
        run.workers.start(url=proxy.url)
        job_id = run.server.submit("conformance.echo", {"n": 1})
        job = run.server.wait_for([job_id])[job_id]
        equal((job["state"], job["attempts"]), ("SUCCEEDED", 1), "state, attempts")
        # The first complete landed and its answer was lost: the worker sends it again, and
        # is answered 200 with the job as recorded (nothing written twice).
        path = f"/jobs/{job_id}/complete"
        wait_until(lambda: proxy.answered.count((path, 200)) >= 1, 10,
                   "the complete sent again after its answer was lost")
        check(proxy.lost == [path], f"lost answers: {proxy.lost}")
        after = run.server.submit("conformance.echo", {"n": 2})  # and it carries on
        equal(run.server.wait_for([after])[after]["state"], "SUCCEEDED", "the next job")
    finally:
        proxy.close()


def a_long_poll_abandoned_strands_nothing(run: Run) -> None:
    """A worker that leaves in the middle of a long poll: killed (its connection closes
    while the server waits for a job), and stopped (SIGTERM: it exits once its last poll
    ends, running what that answers). Either way the job that arrives then is run once, at
    attempt 1 with no crash counted: never leased to a caller that has gone and left RUNNING
    until its lease runs out (docs/protocol.md, "Stopping during a long poll")."""
    server = run.server
    killed = run.workers.start(wait_seconds=20)
    time.sleep(0.3)  # into its long poll (a kill before it changes nothing below)
    killed.signal(signal.SIGKILL)
    killed.process.wait()
    after_kill = server.submit("conformance.echo", {"log": str(run.log)})
    time.sleep(0.5)  # a poll the server kept open for the dead caller would take it now
    second = run.workers.start()
    job = server.wait_for([after_kill], timeout=15)[after_kill]
    equal((job["state"], job["attempts"], job["crash_recoveries"]), ("SUCCEEDED", 1, 0),
          "the job that came after a poller was killed: state, attempts, crashes")
    equal(started_by(run.log, after_kill), [second.worker_id], "started by")
    second.signal(signal.SIGTERM)  # polling again (1 s polls): stopped mid-poll
    after_stop = server.submit("conformance.echo", {"log": str(run.log)})
    try:
        code = second.process.wait(15)
    except Exception as exc:
        raise CaseFailed("the worker did not exit within 15 s of SIGTERM mid-poll") from exc
    equal(code, 0, "the exit status after SIGTERM mid-poll")
    if run.server.job(after_stop)["state"] != "SUCCEEDED":
        run.workers.start()  # its last poll did not answer the job: another runs it
    job = server.wait_for([after_stop], timeout=15)[after_stop]
    equal((job["state"], job["attempts"], job["crash_recoveries"]), ("SUCCEEDED", 1, 0),
          "the job that came while a worker stopped mid-poll: state, attempts, crashes")


def trace_context_reaches_the_worker(run: Run) -> None:
    """The W3C trace context a job was submitted in is leased with it (``traceparent``,
    ``tracestate``) and reaches the task: the echo result carries what the worker got."""
    run.workers.start()
    trace_id = secrets.token_hex(16)
    parent = f"00-{trace_id}-{secrets.token_hex(8)}-01"
    state = "conformance=kit"
    traced = run.server.submit("conformance.echo", {"traced": True},
                               headers={"traceparent": parent, "tracestate": state})
    plain = run.server.submit("conformance.echo", {"traced": False})
    jobs = run.server.wait_for([traced, plain])
    result = jobs[traced]["result"]
    got = result.get("traceparent") if isinstance(result, dict) else None
    check(isinstance(got, str) and len(got.split("-")) == 4
          and got.split("-")[1] == trace_id,
          f"the traceparent the task got: {got!r}, expected one of trace {trace_id} "
          f"(submitted as {parent})")
    equal(result.get("tracestate"), state, "the tracestate the task got")
    result = jobs[plain]["result"]
    equal({k: result.get(k, "missing") for k in TRACE_KEYS},
          {"traceparent": None, "tracestate": None}, "the trace context of a job without one")


def not_from_the_last_attempt(jobs: dict[str, Any], logged: list[list[str]]) -> list[str]:
    """The SUCCEEDED jobs whose result names another worker than the one that started the
    job last. A frozen worker that wakes may start a job it had leased after the worker
    that took it over did, then learn from its heartbeat that the lease is gone and stop
    (``cancelled``): that start is no attempt of the job's."""
    stopped = {(line[1], line[3]) for line in logged if line[0] == "cancelled"}
    last_start = {line[1]: line[3] for line in logged
                  if line[0] == "start" and (line[1], line[3]) not in stopped}
    return [j for j, job in jobs.items() if job["state"] == "SUCCEEDED"
            and job["result"]["worker_id"] != last_start.get(j)]


def a_faulty_run_loses_nothing_and_commits_once(run: Run) -> None:
    """Jepsen-style: jobs run while workers are killed, frozen past their leases and
    stopped; then count. Lost (not SUCCEEDED) 0, duplicated commits (a second SUCCEEDED in
    a job's history, or a result from a worker that did not run its last attempt: the last
    start of a worker that did not stop it as a zombie) 0."""
    server, log = run.server, run.log
    ids = [server.submit("conformance.sleep", {"seconds": 0.4, "log": str(log)})
           for _ in range(24)]
    killed, frozen = run.workers.start(max_jobs=3), run.workers.start(max_jobs=3)
    wait_until(lambda: len([line for line in lines(log) if line[0] == "start"]) >= 4, 15,
               "the first starts")
    killed.signal(signal.SIGKILL)
    frozen.signal(signal.SIGSTOP)  # past its leases: taken over, a zombie when it wakes
    run.workers.start(max_jobs=3)
    time.sleep(3.5)
    frozen.signal(signal.SIGCONT)
    frozen.signal(signal.SIGTERM)
    jobs = server.wait_for(ids, timeout=90)
    lost = [j for j, job in jobs.items() if job["state"] != "SUCCEEDED"]
    twice = [j for j, job in jobs.items()
             if [h["to"] for h in job["history"]].count("SUCCEEDED") > 1]
    wrong = not_from_the_last_attempt(jobs, lines(log))
    check(not lost and not twice and not wrong,
          f"lost {len(lost)} {lost}, duplicated commits {len(twice)} {twice}, results not "
          f"from the last attempt's worker {len(wrong)} {wrong}")


CASES: tuple[Case, ...] = (
    Case("lease-and-finish", lease_and_finish, "an echo job leased and completed with its result"),
    Case("retry-to-dead", retries_to_dead_and_non_retryable,
         "failures retried to DEAD, a non-retryable one DEAD at once, a redrive from attempt 1"),
    Case("heartbeats", heartbeats_extend_the_lease,
         "a job longer than its lease kept by heartbeats, never taken over"),
    Case("zombie", a_zombie_s_finish_is_refused,
         "a frozen worker's lease taken over (a higher attempt); its late finish changes nothing"),
    Case("cancel", cancel_ends_the_job_within_seconds,
         "a cancel seen on a heartbeat: the job CANCELLED within seconds, the task stopped"),
    Case("sigterm", sigterm_drains,
         "SIGTERM: jobs in hand finish and are reported, exit 0, nothing left RUNNING"),
    Case("kill", a_killed_worker_s_job_runs_again,
         "kill -9 mid-job: another worker runs it again"),
    Case("priorities", priorities_and_fairness,
         "high priority first; a quiet tenant is not stuck behind a noisy one"),
    Case("unasked-task", an_unasked_task_is_never_given,
         "a task the worker did not ask for is never given"),
    Case("timeout", a_timeout_ends_the_attempt,
         "past timeout_seconds the attempt ends AttemptTimeout and the task stops"),
    Case("result-too-large", a_result_over_the_limit_ends_payload_too_large,
         "a result over 64 KiB ends the attempt PayloadTooLarge, not retried"),
    Case("lost-finish", a_lost_finish_answer_is_sent_again,
         "a complete whose answer was lost is sent again and answered 200; nothing twice"),
    Case("long-poll-abort", a_long_poll_abandoned_strands_nothing,
         "killed or stopped mid-poll: the job that arrives then runs once, attempt 1, no crash"),
    Case("trace-context", trace_context_reaches_the_worker,
         "the submission's traceparent and tracestate are leased with the job and reach it"),
    Case("faulty-run", a_faulty_run_loses_nothing_and_commits_once,
         "workers killed, frozen and stopped mid-run: lost 0, duplicated commits 0"),
)


def selected(exclude: Sequence[str] = ()) -> list[tuple[Case, bool]]:
    """Every case, each with whether it runs; an unknown name in ``exclude`` is refused."""
    names = {case.name for case in CASES}
    unknown = sorted(set(exclude) - names)
    if unknown:
        raise ValueError(f"unknown case {', '.join(unknown)}; the cases are "
                         f"{', '.join(case.name for case in CASES)}")
    return [(case, case.name not in exclude) for case in CASES]


__all__ = ["CASES", "Case", "Run", "lines", "selected", "started_by", "wait_until"]
