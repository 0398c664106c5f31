"""``leasehold.client`` against a real HTTP server that answers from a script: retries honour
``Retry-After`` and repeat only what is safe to repeat, results and failures come back as
values and exceptions, and requests are signed when asked."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from leasehold.client import (
    ApiError,
    AsyncClient,
    Cancelled,
    Client,
    JobFailed,
    ResultTimeout,
    set_default_client,
)
from leasehold.core.registry import TaskRegistry


@dataclass
class Script:
    """What the server answers, in order (the last answer repeats), and what it was sent."""

    answers: list[tuple[int, dict[str, str], Any]] = field(default_factory=list)
    seen: list[tuple[str, str, dict[str, str], Any]] = field(default_factory=list)


@pytest.fixture
def server() -> Iterator[tuple[str, Script]]:
    script = Script()

    class Handler(BaseHTTPRequestHandler):
        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length)) if length else None
            script.seen.append((self.command, self.path, dict(self.headers.items()), body))
            status, headers, answer = script.answers.pop(0) if len(script.answers) > 1 \
                else script.answers[0]
            data = json.dumps(answer).encode()
            self.send_response(status)
            for name, value in {"Content-Type": "application/json", **headers}.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_DELETE = _serve

        def log_message(self, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", script
    finally:
        httpd.shutdown()
        httpd.server_close()


def job(state: str, **fields: Any) -> dict[str, Any]:
    return {"job_id": "J1", "state": state, "attempts": 1, **fields}


def refused(status: int, retry_after: str | None = None) -> tuple[int, dict[str, str], Any]:
    headers = {"Retry-After": retry_after} if retry_after else {}
    return status, headers, {"error": {"code": "rate_limited", "message": "slow down"}}


def recording_client(url: str, **options: Any) -> tuple[Client, list[float]]:
    waits: list[float] = []
    return Client(url, sleep=waits.append, **options), waits


def test_a_submit_refused_with_429_is_sent_again_after_its_retry_after(
        server: tuple[str, Script]) -> None:
    url, script = server
    script.answers = [refused(429, "2"), (201, {}, job("QUEUED"))]
    client, waits = recording_client(url, tenant="acme")
    handle = client.submit("echo", {"hi": 1}, delay_seconds=60, labels={"team": "x"})
    assert handle.job_id == "J1" and handle.created
    assert waits == [2.0]
    (_, _, first_headers, first), (_, _, _, second) = script.seen
    (_, _, second_headers, _) = script.seen[1]
    assert first == second  # the same request, its retry token included
    assert first_headers["Idempotency-Key"].startswith("client-")
    assert second_headers["Idempotency-Key"] == first_headers["Idempotency-Key"]
    assert "idempotency_key" not in first  # the token is a header: the API decides its use
    assert first["delay_seconds"] == 60 and first["labels"] == {"team": "x"}
    assert first_headers["X-Leasehold-Tenant"] == "acme"


def test_a_submit_that_may_have_landed_is_repeated_only_with_an_idempotency_key(
        server: tuple[str, Script]) -> None:
    url, script = server
    script.answers = [refused(502), (200, {}, job("QUEUED"))]
    client, waits = recording_client(url)
    assert not client.submit("echo").created  # 200: an earlier submit made the job
    assert len(script.seen) == 2 and len(waits) == 1
    assert script.seen[0][2]["Idempotency-Key"] == script.seen[1][2]["Idempotency-Key"]

    script.seen.clear()
    script.answers = [refused(502), (201, {}, job("QUEUED"))]
    bare, _ = recording_client(url, idempotency_keys=False)
    with pytest.raises(ApiError) as raised:
        bare.submit("echo")
    assert raised.value.status == 502 and len(script.seen) == 1
    assert "Idempotency-Key" not in script.seen[0][2]
    assert "idempotency_key" not in script.seen[0][3]


def test_retries_end_after_their_attempts_and_a_long_retry_after_is_not_slept(
        server: tuple[str, Script]) -> None:
    url, script = server
    script.answers = [refused(503, "1")]
    client, waits = recording_client(url)
    with pytest.raises(ApiError) as raised:
        client.list()
    assert raised.value.status == 503 and len(script.seen) == 5 and waits == [1.0] * 4

    script.seen.clear()
    script.answers = [refused(429, "120")]
    with pytest.raises(ApiError) as raised:
        client.submit("echo")
    assert raised.value.retry_after == "120" and len(script.seen) == 1


def test_a_refused_connection_is_an_error_in_words_without_retries() -> None:
    client, waits = recording_client("http://127.0.0.1:9")
    with pytest.raises(ApiError) as raised:
        client.get("J1")
    assert "cannot reach the API at http://127.0.0.1:9" in str(raised.value) and waits == []


def test_result_returns_the_result_and_waits_with_long_polls(server: tuple[str, Script]) -> None:
    url, script = server
    script.answers = [(201, {}, job("QUEUED")), (200, {}, job("RUNNING")),
                      (200, {}, job("SUCCEEDED", result={"hi": 1}))]
    handle = Client(url).submit("echo", {"hi": 1})
    assert handle.result(timeout=60) == {"hi": 1}
    polls = [path for method, path, _, _ in script.seen if method == "GET"]
    assert len(polls) == 2 and all("wait_seconds=" in p for p in polls)
    assert float(polls[0].split("wait_seconds=")[1]) <= 20


def test_a_dead_job_raises_its_error_with_the_remote_traceback(
        server: tuple[str, Script]) -> None:
    url, script = server
    remote = 'Traceback (most recent call last):\n  File "tasks.py", line 3\nKeyError: \'to\'\n'
    script.answers = [(200, {}, job("DEAD", error={"type": "KeyError", "message": "'to'",
                                                   "traceback": remote}))]
    with pytest.raises(JobFailed) as raised:
        Client(url).job("J1").result()
    assert raised.value.type == "KeyError" and raised.value.remote_traceback == remote
    assert 'File "tasks.py", line 3' in str(raised.value)


def test_a_cancelled_job_raises_cancelled_and_an_unfinished_one_times_out(
        server: tuple[str, Script]) -> None:
    url, script = server
    script.answers = [(200, {}, job("CANCELLED"))]
    with pytest.raises(Cancelled):
        Client(url).job("J1").result(timeout=5)
    script.answers = [(200, {}, job("RUNNING"))]
    with pytest.raises(ResultTimeout) as raised:
        Client(url).job("J1").result(timeout=0.2)
    assert isinstance(raised.value, TimeoutError) and "still RUNNING" in str(raised.value)


@pytest.mark.parametrize("answer", [job("PAUSED_FOREVER"), {"job_id": "J1"}])
def test_a_state_the_client_does_not_know_ends_the_wait_with_an_error_naming_it(
        server: tuple[str, Script], answer: dict[str, Any]) -> None:
    # The second answer would end an unbounded wait: the client must not wait past the first.
    url, script = server
    script.answers = [(200, {}, answer), (200, {}, job("SUCCEEDED", result=1))]
    with pytest.raises(ApiError) as raised:
        Client(url).job("J1").result()
    assert str(answer.get("state", "without a state")) in str(raised.value)
    assert len(script.seen) == 1

    script.seen.clear()
    script.answers = [(200, {}, answer), (200, {}, job("SUCCEEDED", result=1))]

    async def wait() -> Any:
        return await (await AsyncClient(url).job("J1")).result()

    with pytest.raises(ApiError):
        asyncio.run(wait())
    assert len(script.seen) == 1


def conflict(message: str) -> tuple[int, dict[str, str], Any]:
    return 409, {}, {"error": {"code": "conflict", "message": message}}


def test_a_cancel_whose_first_answer_was_lost_is_done_not_a_conflict(
        server: tuple[str, Script]) -> None:
    # The first DELETE landed and its answer was lost (502): the retry is told "already
    # finished", which is that first DELETE's own doing.
    url, script = server
    script.answers = [refused(502), conflict("job J1 already finished (CANCELLED)"),
                      (200, {}, job("CANCELLED"))]
    client, _ = recording_client(url)
    assert client.cancel("J1")["state"] == "CANCELLED"
    assert [method for method, *_ in script.seen] == ["DELETE", "DELETE", "GET"]

    script.answers = [refused(502), conflict("workflow W1 already finished (CANCELLED)"),
                      (200, {}, {"workflow_id": "W1", "state": "CANCELLED"})]
    assert client.cancel_workflow("W1")["state"] == "CANCELLED"

    script.answers = [refused(502), (404, {}, {"error": {"code": "not_found",
                                                         "message": "no schedule S1"}})]
    assert client.delete_schedule("S1") is None


def test_a_conflict_on_a_first_or_refused_cancel_is_still_an_error(
        server: tuple[str, Script]) -> None:
    url, script = server
    client, _ = recording_client(url)
    script.answers = [conflict("job J1 already finished (SUCCEEDED)")]
    with pytest.raises(ApiError, match="SUCCEEDED"):
        client.cancel("J1")
    # Refused with 429, the first DELETE wrote nothing: a 409 after it is the job's own end.
    script.answers = [refused(429, "0"), conflict("job J1 already finished (CANCELLED)")]
    with pytest.raises(ApiError, match="CANCELLED"):
        client.cancel("J1")
    # Lost, then a conflict for a job that finished otherwise: the conflict stands.
    script.answers = [refused(502), conflict("job J1 already finished (DEAD)"),
                      (200, {}, job("DEAD"))]
    with pytest.raises(ApiError, match="DEAD"):
        client.cancel("J1")
    script.answers = [(404, {}, {"error": {"code": "not_found", "message": "no schedule"}})]
    with pytest.raises(ApiError) as raised:
        client.delete_schedule("S1")
    assert raised.value.status == 404


def test_a_long_poll_is_clamped_and_a_naive_run_at_is_refused_unsent(
        server: tuple[str, Script]) -> None:
    url, script = server
    script.answers = [(200, {}, job("RUNNING"))]
    Client(url).get("J1", wait_seconds=25)
    assert script.seen[0][1].endswith("wait_seconds=20.0")
    script.seen.clear()
    with pytest.raises(ValueError, match="run_at must be a timezone-aware datetime"):
        Client(url).submit("echo", run_at=datetime(2030, 1, 1, 12))
    assert script.seen == []


def test_a_decorated_task_submits_itself_through_the_default_client(
        server: tuple[str, Script]) -> None:
    url, script = server
    script.answers = [(201, {}, job("QUEUED"))]
    registry = TaskRegistry()

    @registry.task("send-email", max_attempts=5)
    def send_email(payload: Any, ctx: Any) -> Any:
        return payload

    set_default_client(Client(url))
    try:
        handle = send_email.submit({"to": "a@example.com"}, priority="high")  # type: ignore[attr-defined]
    finally:
        set_default_client(None)
    assert handle.job_id == "J1"
    body = script.seen[0][3]
    assert body["task"] == "send-email" and body["priority"] == "high"
    assert send_email({"x": 1}, None) == {"x": 1}  # still the plain function
    with pytest.raises(TypeError, match="unknown option"):
        Client(url).submit(send_email, delay=5)


def test_aws_auth_signs_each_request_for_execute_api(
        server: tuple[str, Script], monkeypatch: pytest.MonkeyPatch) -> None:
    url, script = server
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDCLIENTEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    script.answers = [(200, {}, job("SUCCEEDED"))]
    Client(url, aws_auth=True, region="eu-west-1").get("J1")
    authorization = script.seen[0][2]["Authorization"]
    assert authorization.startswith("AWS4-HMAC-SHA256 Credential=AKIDCLIENTEXAMPLE/")
    assert "/eu-west-1/execute-api/aws4_request" in authorization


def test_task_submit_in_a_plain_script_needs_no_client_import(
        server: tuple[str, Script]) -> None:
    """``task.submit()`` in a script that imports only ``leasehold`` (issue 47: it needed
    ``import leasehold.client`` first): the client is loaded by the first submission."""
    import os
    import subprocess
    import sys

    url, script = server
    script.answers = [(201, {}, job("QUEUED"))]
    code = ("import sys\n"
            "from leasehold import task\n"
            "@task('lonely')\n"
            "def lonely(payload, ctx):\n    return None\n"
            "print('leasehold.client' in sys.modules)\n"
            "print(lonely.submit({'n': 1}).job_id)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=False, timeout=60, env={**os.environ, "LEASEHOLD_URL": url})
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", job("QUEUED")["job_id"]]
    (method, path, _, sent), = script.seen
    assert (method, path) == ("POST", "/jobs")
    assert sent == {"task": "lonely", "payload": {"n": 1}}


def test_flow_options_are_sent_and_an_expired_job_ends_result_with_expired(
        server: tuple[str, Script]) -> None:
    from leasehold.client import Expired

    url, script = server
    script.answers = [(200, {}, job("QUEUED", duplicate=True)), (200, {}, job("EXPIRED"))]
    client, _ = recording_client(url)
    handle = client.submit("sync", {"a": 1}, unique={"key": "sync:{payload.a}"},
                           start_within_seconds=30)
    assert not handle.created
    (_, _, _, sent), = script.seen
    assert sent["unique"] == {"key": "sync:{payload.a}"} and sent["start_within_seconds"] == 30
    with pytest.raises(Expired):
        handle.result(timeout=1)
    script.answers = [(201, {}, job("QUEUED"))]
    client.submit("rebuild", None, debounce={"key": "d", "seconds": 5})
    debounced = script.seen[-1][3]
    assert debounced["debounce"] == {"key": "d", "seconds": 5}
    assert "idempotency_key" not in debounced  # the server refuses the pair
