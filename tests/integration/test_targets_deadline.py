"""``timeout_seconds`` is an absolute deadline over the whole call (issue 43, defect 6).

A server that trickles a byte every 0.25 s resets a socket timeout at every byte: it held a
call with ``timeout_seconds: 1`` open for as long as it trickled, the worker abandoned the
attempt at its own timeout and gave back the host's slot, and the retry reached the server
while the first call was still open. The call now ends at its deadline (a timer shuts its
socket), so the host's slot is never given back while a call to it is open.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest

from leasehold.aws.faults import Fault
from leasehold.core.policy import RetryPolicy
from leasehold.core.spec import JobSpec
from leasehold.core.states import JobState
from leasehold.lifecycle.app import Leasehold
from leasehold.lifecycle.submission import submit
from leasehold.targets.config import TargetConfig
from leasehold.targets.failures import HttpTimeout
from leasehold.targets.http_call import Caller, call
from leasehold.targets.http_spec import prepare
from tests.conftest import MakeApp
from tests.integration.helpers import inject
from tests.integration.target_server import Network, Server, Trickle, loopback_only, serve
from tests.integration.test_targets_http import run_until

LOOPBACK = TargetConfig.parse({"http_allow": ["127.0.0.0/8"]})
#: A body of 100 bytes at 4 a second: 25 s, were the timeout reset by every byte.
BODY = Trickle(head=b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n", raw=b"x" * 100)
#: The status line and headers themselves, trickled.
HEADERS = Trickle(raw=b"HTTP/1.1 200 OK\r\n" + b"X-Slow: " + b"y" * 100 + b"\r\n\r\n")


@pytest.fixture
def server() -> Iterator[Server]:
    yield from serve()


@pytest.fixture
def network(monkeypatch: pytest.MonkeyPatch) -> Iterator[Network]:
    guarded = loopback_only(monkeypatch)
    yield guarded
    assert guarded.refused == [], "something tried to leave loopback"


def settled(server: Server) -> None:
    """Wait (bounded) for the server to see the client gone."""
    ends = time.monotonic() + 5
    while server.in_flight and time.monotonic() < ends:
        time.sleep(0.02)


@pytest.mark.parametrize("trickle", [BODY, HEADERS], ids=["body", "headers"])
def test_a_trickling_server_is_cut_at_timeout_seconds_not_at_each_byte(
        server: Server, network: Network, trickle: Trickle) -> None:
    server.default = trickle
    payload, _ = prepare(LOOPBACK, {"url": f"{server.url}/slow", "timeout_seconds": 1})
    started = time.monotonic()
    with pytest.raises(HttpTimeout):
        call(Caller(LOOPBACK, now_ms=lambda: 0), payload)
    # The deadline, not the 25 s the server would trickle (nor the attempt's backstop).
    assert time.monotonic() - started < 2.0
    settled(server)
    assert server.in_flight == 0  # the connection is closed, not left trickling


@pytest.fixture
def app(make_app: MakeApp, server: Server, network: Network) -> Leasehold:
    host = server.url.removeprefix("http://")
    return make_app(targets={"http_allow": ["127.0.0.0/8"],
                             "http_hosts": {host: {"concurrency": 1}}})


@pytest.mark.parametrize("trickle", [BODY, HEADERS], ids=["body", "headers"])
def test_a_retry_never_overlaps_a_trickled_call_on_a_host_of_concurrency_1(
        app: Leasehold, server: Server, trickle: Trickle) -> None:
    server.default = trickle
    job_id = submit(app, JobSpec(
        target={"http": {"url": f"{server.url}/order", "method": "POST", "body": {"id": 7},
                         "timeout_seconds": 1}},
        max_attempts=2, retry=RetryPolicy(min_backoff_seconds=0, max_backoff_seconds=0)
    )).job.job_id
    run_until(app, job_id, JobState.DEAD, seconds=30)
    settled(server)
    assert len(server.requests) == 2
    assert server.most_in_flight == 1  # the POST never ran twice at once
    job = app.store.get(job_id)
    # Each attempt was ended by its call's deadline, not abandoned at the attempt's timeout.
    assert [e["type"] for e in job.extra["attempt_errors"]] == ["HttpTimeout"] * 2


def test_a_lost_response_on_the_timed_out_attempt_s_write_still_never_overlaps(
        app: Leasehold, server: Server) -> None:
    """The write that records the timeout (and gives the slot back) lands, and the worker
    sees an error past botocore's retries: the retry still starts after the call ended."""
    server.default = BODY
    injector = inject(app, Fault(target="dynamodb.TransactWriteItems", kind="lose-raise",
                                 when=lambda body: "HttpTimeout" in json.dumps(body)))
    job_id = submit(app, JobSpec(
        target={"http": {"url": f"{server.url}/order", "method": "POST", "timeout_seconds": 1}},
        max_attempts=2, retry=RetryPolicy(min_backoff_seconds=0, max_backoff_seconds=0)
    )).job.job_id
    run_until(app, job_id, JobState.DEAD, seconds=60)
    assert sum(injector.injected.values()) == 1
    settled(server)
    assert len(server.requests) == 2 and server.most_in_flight == 1
