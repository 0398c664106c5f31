"""The state machine's rules and invariants for HTTP targets (issue 43), against a loopback
server.

Mixed into ``tests/integration/test_stateful.py``'s machine, so target jobs meet every other
rule there: lost responses and throttles on any write, errors past the retries, workers
that die right after their lease, duplicates, cancels and pauses, manual retries, sweeps and
clock jumps. The server answers as a target's host may: at once, with ``Retry-After``, with a 5xx,
echoing the request's headers (a secret among them) in a 2xx or a 4xx body, or trickling a
byte every 0.25 s past the call's timeout. After every step: never more calls in flight to
the host than its limit (a call outliving its attempt would overlap its retry), and no
secret value in any row or log line.
"""

from __future__ import annotations

import io
import json
import logging
from collections import Counter
from typing import Any

from hypothesis import event
from hypothesis import strategies as st
from hypothesis.stateful import initialize, invariant, precondition, rule

from leasehold.core.policy import RetryPolicy
from leasehold.core.spec import JobSpec
from leasehold.errors import LeaseholdError, RateLimited
from leasehold.lifecycle import control, pausing
from leasehold.lifecycle.submission import submit
from tests.integration.target_server import Request, Server, Trickle, serve

SECRET = "st4te-m4chine-secret-91c2"
HOST_LIMIT = 1
_SERVER: list[Server] = []  # one loopback server for the process, reset by each machine
_RUNNING: list[Any] = []  # its generator, kept: closing it would stop the server
_LOG = io.StringIO()


def _echo(status: int) -> Any:
    def answer(request: Request) -> tuple[int, dict[str, str], bytes]:
        return status, {"Content-Type": "application/json"}, \
            json.dumps({"you_sent": request.headers}).encode()
    return answer


ANSWERS: dict[str, Any] = {
    "ok": None,
    "retry_after": (429, {"Retry-After": "1"}, b"slow down"),
    "error": (503, {}, b"busy"),
    "echo": _echo(200),
    "echo_4xx": _echo(400),
    "trickle": Trickle(head=b"HTTP/1.1 200 OK\r\nContent-Length: 40\r\n\r\n", raw=b"x" * 40),
}


def _server() -> Server:
    if not _SERVER:
        _RUNNING.append(serve())
        _SERVER.append(next(_RUNNING[0]))  # a daemon thread, for the process's life
        handler = logging.StreamHandler(_LOG)
        handler.setLevel(logging.INFO)
        logging.getLogger().addHandler(handler)
    return _SERVER[0]


class TargetsRules:
    """Rules and invariants for HTTP targets; expects the machine's ``app``, ``jobs``,
    ``keys``, ``table_items`` and ``failed``."""

    app: Any
    jobs: list[str]
    keys: Any
    table_items: Any
    failed: Any

    def targets_settings(self) -> dict[str, Any]:
        """The machine's ``Settings.targets``: loopback allowed, the server's host at its
        limit, and a secret bound to it (the machine's server starts here, fresh)."""
        server = _server()
        with server.lock:
            server.requests.clear()
            server.answers.clear()
            server.most_in_flight = server.in_flight
        server.default = _echo(200)
        _LOG.seek(0)
        _LOG.truncate()
        self.target_jobs: list[str] = []
        self.target_checks: Counter[str] = Counter()
        self.secret_made = False
        host = server.url.removeprefix("http://")
        return {"http_allow": ["127.0.0.0/8"],
                "http_hosts": {host: {"concurrency": HOST_LIMIT}},
                "http_secrets": {"partner": {"secret": "secretsmanager:sm-partner",
                                             "origins": [server.url]}}}

    @initialize(answers=st.lists(st.sampled_from(sorted(ANSWERS)), min_size=1, max_size=3),
                secret=st.booleans())
    def some_http_targets(self, answers: list[str], secret: bool) -> None:
        """Target jobs from the first step, so every example has calls to check."""
        for answer in answers:
            self.submit_http_target(answer, secret, "acme")

    @rule(answer=st.sampled_from(sorted(ANSWERS)), secret=st.booleans(),
          tenant=st.sampled_from(("default", "acme")))
    def submit_http_target(self, answer: str, secret: bool, tenant: str) -> None:
        """A target job to the host; the server's next answer is ``answer``."""
        server = _server()
        if not self.secret_made:
            self.app.clients.client("secretsmanager").create_secret(
                Name="sm-partner", SecretString=SECRET)
            self.secret_made = True
        http: dict[str, Any] = {"url": f"{server.url}/{answer}", "method": "POST",
                                "body": {"n": next(self.keys)}, "timeout_seconds": 1}
        if secret:
            http["auth"] = {"secret_header": {"name": "Authorization", "secret": "partner",
                                              "prefix": "Bearer "}}
        spec = JobSpec(target={"http": http}, tenant=tenant, max_attempts=3,
                       idempotency_key=f"t{next(self.keys)}",
                       retry=RetryPolicy(min_backoff_seconds=0, max_backoff_seconds=0.3))
        for _ in range(3):
            try:
                job = submit(self.app, spec).job
            except RateLimited:
                return
            except (LeaseholdError, *self.failed):
                event("targets: a submission failed; the caller retries with its key")
                continue
            if ANSWERS[answer] is not None:
                with server.lock:
                    server.answers.append(ANSWERS[answer])
            if job.job_id not in self.jobs:
                self.jobs.append(job.job_id)
                self.target_jobs.append(job.job_id)
            event(f"targets: submitted ({answer})")
            return

    @precondition(lambda self: getattr(self, "target_jobs", None))
    @rule(data=st.data())
    def cancel_a_target_job(self, data: st.DataObject) -> None:
        """A cancel of a target job: queued, parked for its host's slot, or finished."""
        try:
            control.cancel(self.app, data.draw(st.sampled_from(self.target_jobs)))
        except (LeaseholdError, *self.failed):
            event("targets: cancel refused or failed")
        else:
            event("targets: cancelled")

    def flow_drained(self) -> None:
        """At the drain (every target call made, the weather clear): the same checks, over
        every call the example made."""
        self.no_host_has_more_calls_in_flight_than_its_limit()
        self.no_secret_value_in_a_row_or_a_log_line()
        event(f"targets: drained after {min(len(_SERVER[0].requests), 8)}+ calls, checks "
              f"fired {min(self.target_checks['in flight'], 5)}+ (in flight) and "
              f"{min(self.target_checks['secret'], 5)}+ (secret)")
        super().flow_drained()  # type: ignore[misc]

    @precondition(lambda self: getattr(self, "target_jobs", None))
    @rule(data=st.data(), pause=st.booleans())
    def pause_or_resume_a_target_job(self, data: st.DataObject, pause: bool) -> None:
        """A pause (or its resume) of a target job: queued, parked for its host's slot,
        or running its call (the drain resumes every paused job)."""
        job_id = data.draw(st.sampled_from(self.target_jobs))
        try:
            (pausing.pause if pause else pausing.resume)(self.app, job_id)
        except Exception as exc:  # refused (409) or a write past its retries
            event(f"targets: {'pause' if pause else 'resume'} refused: {type(exc).__name__}")
        else:
            event(f"targets: {'paused' if pause else 'resumed'}")

    @invariant()
    def no_host_has_more_calls_in_flight_than_its_limit(self) -> None:
        if not _SERVER:
            return
        server = _SERVER[0]
        assert server.most_in_flight <= HOST_LIMIT, server.most_in_flight
        if server.requests:
            self.target_checks["in flight"] += 1
            event(f"targets: in-flight checked after {min(len(server.requests), 5)}+ calls")

    @invariant()
    def no_secret_value_in_a_row_or_a_log_line(self) -> None:
        if not getattr(self, "secret_made", False):
            return
        rows = json.dumps(self.table_items(self.app.settings.jobs_table))
        assert SECRET not in rows
        assert SECRET not in _LOG.getvalue()
        sent = sum(1 for r in _SERVER[0].requests
                   if r.headers.get("Authorization") == f"Bearer {SECRET}")
        if sent:  # the value really went out (and could have come back) before this check
            self.target_checks["secret"] += 1
            event(f"targets: secret checked after {min(sent, 3)}+ calls that carried it")
