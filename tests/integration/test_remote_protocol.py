"""The worker protocol where it and the docs once disagreed (issue 45, docs/protocol.md).

Each test is one of the eight disagreements a worker written from the docs found; every
request goes through the API handler as API Gateway would deliver it."""

from __future__ import annotations

from typing import Any

import pytest

from leasehold.aws.faults import Fault
from leasehold.core.registry import TaskDefinition
from leasehold.lifecycle import sweeper
from leasehold.lifecycle.app import Leasehold
from leasehold.remote import leasing
from leasehold.remote.hangup import CLIENT_GONE
from tests.integration.api_client import ApiClient
from tests.integration.helpers import inject

EXTERNAL = {"images": ("resize", "crop")}
NO_BACKOFF = {"min_backoff_seconds": 0, "max_backoff_seconds": 0}


@pytest.fixture
def remote(make_app: Any) -> Leasehold:
    return make_app(pools=("default", "images"), external_tasks=EXTERNAL)


@pytest.fixture
def api(remote: Leasehold) -> ApiClient:
    return ApiClient(remote)


def submit(api: ApiClient, task: str = "resize", **extra: Any) -> str:
    reply = api.post("/jobs", {"task": task, "payload": {"n": 1}, **extra}, tenant="acme")
    assert reply.status == 201, reply.body
    return str(reply.body["job_id"])


def lease(api: ApiClient, **body: Any) -> list[dict[str, Any]]:
    reply = api.post("/workers/lease", {"pool": "images", "wait_seconds": 0, **body})
    assert reply.status == 200, reply.body
    return list(reply.body["jobs"])


def shown(api: ApiClient, job_id: str) -> dict[str, Any]:
    return dict(api.get(f"/jobs/{job_id}", tenant="acme").body)


def past_the_lease(remote: Leasehold, clock: Any) -> None:
    clock.advance(remote.settings.lease_seconds + remote.settings.skew_grace_seconds + 1)


# -- 1. a zombie whose job the sweeper ended -----------------------------------------------

@pytest.mark.parametrize("ending", ["DEAD", "CANCELLED"])
def test_a_zombie_whose_job_the_sweeper_ended_is_told_its_lease_was_lost(
        remote: Leasehold, api: ApiClient, clock: Any, ending: str) -> None:
    job_id = submit(api, max_attempts=1)
    [job] = lease(api, worker_id="gone")
    if ending == "CANCELLED":
        assert api.delete(f"/jobs/{job_id}", tenant="acme").status == 200
    past_the_lease(remote, clock)
    report = sweeper.sweep(remote)
    assert (report.dead, report.cancelled) == ((1, 0) if ending == "DEAD" else (0, 1))
    before = remote.store.get(job_id)
    token = job["lease"]["token"]
    for path, body in (("complete", {"token": token, "result": "late"}),
                       ("fail", {"token": token, "error": {"type": "E", "message": "m"}}),
                       ("heartbeat", {"token": token})):
        reply = api.post(f"/jobs/{job_id}/{path}", body)
        assert reply.status == 409 and reply.body["error"]["code"] == "lease_lost", \
            (path, reply.body)
    after = remote.store.get(job_id)
    assert (after.state.value, after.result_json, after.history) == \
        (ending, before.result_json, before.history)


def test_a_finish_whose_answer_was_lost_is_still_answered_as_this_lease_s(
        remote: Leasehold, api: ApiClient) -> None:
    """The record of which lease finished lands with the finish: a lost DynamoDB answer,
    recognised by the worker's own retry, and a repeat of the whole request both see it."""
    job_id = submit(api)
    [job] = lease(api)
    inject(remote, Fault(target="dynamodb.UpdateItem|dynamodb.TransactWriteItems",
                         kind="lose-raise", times=1))
    token = job["lease"]["token"]
    first = api.post(f"/jobs/{job_id}/complete", {"token": token, "result": 3})
    again = api.post(f"/jobs/{job_id}/complete", {"token": token, "result": 3})
    assert (first.status, again.status) == (200, 200)
    assert again.body["state"] == "SUCCEEDED" and again.body["result"] == 3


# -- 3. a repeated retryable fail ----------------------------------------------------------

def test_a_repeated_retryable_fail_answers_the_job_as_it_is(remote: Leasehold,
                                                          api: ApiClient) -> None:
    job_id = submit(api, max_attempts=3, retry={"min_backoff_seconds": 60,
                                                "max_backoff_seconds": 60})
    [job] = lease(api)
    body = {"token": job["lease"]["token"], "error": {"type": "Boom", "message": "x"}}
    first = api.post(f"/jobs/{job_id}/fail", body)
    assert first.status == 200 and first.body["state"] in ("QUEUED", "SCHEDULED")
    row = remote.store.get(job_id)
    again = api.post(f"/jobs/{job_id}/fail", body)  # the first answer never arrived
    assert again.status == 200, again.body
    assert (again.body["state"], again.body["attempts"]) == (first.body["state"], 1)
    assert remote.store.get(job_id).history == row.history  # nothing written twice


def test_a_repeated_fail_of_an_earlier_attempt_is_answered_after_the_next_lease(
        remote: Leasehold, api: ApiClient, clock: Any) -> None:
    job_id = submit(api, max_attempts=3, retry=NO_BACKOFF)
    [job] = lease(api)
    body = {"token": job["lease"]["token"], "error": {"type": "Boom", "message": "x"}}
    assert api.post(f"/jobs/{job_id}/fail", body).status == 200
    clock.advance(1)
    [second] = lease(api)
    assert second["attempt"] == 2
    again = api.post(f"/jobs/{job_id}/fail", body)
    assert again.status == 200 and again.body["state"] == "RUNNING"
    assert remote.store.get(job_id).lease_owner is not None  # attempt 2 untouched


# -- 8. only an external pool is leased ----------------------------------------------------

def test_a_python_pool_cannot_be_leased_over_http(remote: Leasehold, api: ApiClient) -> None:
    remote.registry.register(TaskDefinition(name="py.work", fn=lambda payload, ctx: None))
    job_id = submit(api, task="py.work")
    refused = api.post("/workers/lease", {"pool": "default", "wait_seconds": 0})
    assert refused.status == 422, refused.body
    assert refused.body["error"]["field"] == "pool"
    assert "external" in refused.body["error"]["message"]
    assert shown(api, job_id)["state"] == "QUEUED"  # left to the pool's Python workers


# -- 2. cancel: seen on a heartbeat, ended at once -----------------------------------------

@pytest.mark.parametrize("then", ["reports nothing", "reports a Cancelled failure",
                                  "reports its result"])
def test_a_cancel_seen_on_a_heartbeat_ends_the_job_cancelled_at_once(
        remote: Leasehold, api: ApiClient, then: str) -> None:
    """Whatever the worker does after the heartbeat said cancel (the schema once said
    "report nothing more"; the reference workers sent a ``Cancelled`` failure), the job is
    CANCELLED by that heartbeat, not a lease later by the sweeper."""
    job_id = submit(api)
    [job] = lease(api)
    token = job["lease"]["token"]
    assert api.delete(f"/jobs/{job_id}", tenant="acme").status == 200
    beat = api.post(f"/jobs/{job_id}/heartbeat", {"token": token})
    assert beat.status == 200 and beat.body["cancel_requested"] is True
    assert shown(api, job_id)["state"] == "CANCELLED"
    if then == "reports a Cancelled failure":
        reply = api.post(f"/jobs/{job_id}/fail", {"token": token, "retryable": False, "error": {
            "type": "Cancelled", "message": "cancel requested"}})
        assert reply.status == 200 and reply.body["state"] == "CANCELLED"
    elif then == "reports its result":
        reply = api.post(f"/jobs/{job_id}/complete", {"token": token, "result": 1})
        assert reply.status == 200 and reply.body["state"] == "CANCELLED"
    again = api.post(f"/jobs/{job_id}/heartbeat", {"token": token})  # its answer was lost
    assert again.status == 200 and again.body["cancel_requested"] is True
    ended = remote.store.get(job_id)
    assert ended.state.value == "CANCELLED" and ended.result_json is None
    assert [h.target for h in ended.history].count("CANCELLED") == 1
    assert lease(api) == []  # its message went with the cancel


def test_a_cancel_whose_write_answer_was_lost_still_ends_the_job(
        remote: Leasehold, api: ApiClient) -> None:
    job_id = submit(api)
    [job] = lease(api)
    assert api.delete(f"/jobs/{job_id}", tenant="acme").status == 200
    inject(remote, Fault(target="dynamodb.UpdateItem|dynamodb.TransactWriteItems",
                         kind="lose-raise", times=1))
    beat = api.post(f"/jobs/{job_id}/heartbeat", {"token": job["lease"]["token"]})
    assert beat.status == 200 and beat.body["cancel_requested"] is True
    assert shown(api, job_id)["state"] == "CANCELLED"


# -- 6. a result over the limits -----------------------------------------------------------

@pytest.mark.parametrize("kib", [100, 400])
def test_a_result_over_its_limit_ends_the_attempt_payload_too_large(
        remote: Leasehold, api: ApiClient, kib: int) -> None:
    """100 KiB: over the result limit (64 KiB); 400 KiB: over the API's body limit for other
    routes (320 KiB), which once answered 413 before the finish ran and left it RUNNING."""
    job_id = submit(api, max_attempts=5)
    [job] = lease(api)
    body = {"token": job["lease"]["token"], "result": "x" * (kib * 1024)}
    reply = api.post(f"/jobs/{job_id}/complete", body)
    assert reply.status == 413 and reply.body["error"]["code"] == "payload_too_large"
    ended = shown(api, job_id)
    assert (ended["state"], ended["attempts"], ended["error"]["type"]) == \
        ("DEAD", 1, "PayloadTooLarge")
    again = api.post(f"/jobs/{job_id}/complete", body)  # its answer was lost
    assert again.status == 413
    # The reference workers' fallback on 413: answered the job as it is.
    fallback = api.post(f"/jobs/{job_id}/fail", {"token": job["lease"]["token"], "error": {
        "type": "PayloadTooLarge", "message": "the result is over the limit"}})
    assert fallback.status == 200 and fallback.body["state"] == "DEAD"
    assert [h.target for h in remote.store.get(job_id).history].count("DEAD") == 1


def test_a_payload_too_large_failure_is_never_retried(api: ApiClient) -> None:
    """A worker whose complete met a 413 before the server read it (over the transport's
    limit) reports it: retryable or not, the attempt's end is final."""
    job_id = submit(api, max_attempts=5)
    [job] = lease(api)
    reply = api.post(f"/jobs/{job_id}/fail", {"token": job["lease"]["token"], "error": {
        "type": "PayloadTooLarge", "message": "413 from the gateway"}})
    assert (reply.status, reply.body["state"], reply.body["attempts"]) == (200, "DEAD", 1)


def test_an_oversized_result_whose_write_answer_was_lost_is_still_recorded(
        remote: Leasehold, api: ApiClient) -> None:
    job_id = submit(api, max_attempts=5)
    [job] = lease(api)
    inject(remote, Fault(target="dynamodb.UpdateItem|dynamodb.TransactWriteItems",
                         kind="lose-raise", times=1))
    reply = api.post(f"/jobs/{job_id}/complete", {"token": job["lease"]["token"],
                                                  "result": "x" * (100 * 1024)})
    assert reply.status == 413
    assert shown(api, job_id)["state"] == "DEAD"


# -- 5. timeouts ---------------------------------------------------------------------------

def test_an_attempt_past_its_timeout_is_refused_and_fails_attempt_timeout(
        remote: Leasehold, api: ApiClient, clock: Any) -> None:
    job_id = submit(api, timeout_seconds=2, max_attempts=2, retry=NO_BACKOFF)
    [job] = lease(api)
    token = job["lease"]["token"]
    assert job["timeout_at"] is not None and job["timeout_at"] < job["lease"]["expires_at"]
    clock.advance(1)
    beat = api.post(f"/jobs/{job_id}/heartbeat", {"token": token})
    assert beat.status == 200 and beat.body["expires_at"] == job["timeout_at"]  # not past it
    clock.advance(1.5)
    late = api.post(f"/jobs/{job_id}/heartbeat", {"token": token})
    assert late.status == 409 and late.body["error"]["code"] == "lease_lost"
    assert "timeout" in late.body["error"]["message"]
    ended = shown(api, job_id)
    assert ended["state"] in ("QUEUED", "SCHEDULED") and ended["error"]["type"] == "AttemptTimeout"
    clock.advance(1)
    [second] = lease(api)  # retried by the task's policy
    assert second["attempt"] == 2
    clock.advance(3)
    # A result reported past the timeout comes too late, as a Python handler's would.
    done = api.post(f"/jobs/{job_id}/complete", {"token": second["lease"]["token"],
                                                 "result": "late"})
    assert done.status == 409 and "timeout" in done.body["error"]["message"]
    final = shown(api, job_id)
    assert (final["state"], final["error"]["type"], final["result"]) == \
        ("DEAD", "AttemptTimeout", None)


def test_an_attempt_cut_by_the_job_s_deadline_ends_dead(
        remote: Leasehold, api: ApiClient, clock: Any) -> None:
    job_id = submit(api, timeout_seconds=60, deadline_seconds=3, max_attempts=5)
    [job] = lease(api)
    assert job["timeout_at"] == job["deadline_at"]
    clock.advance(4)
    late = api.post(f"/jobs/{job_id}/heartbeat", {"token": job["lease"]["token"]})
    assert late.status == 409 and "deadline" in late.body["error"]["message"]
    assert shown(api, job_id)["state"] == "DEAD"


def test_an_external_task_s_policy_gives_its_jobs_their_timeout_and_retries(
        make_app: Any, clock: Any) -> None:
    """``PoolConfig(kind="external", tasks={...})`` and ``--external POOL:{...}`` write
    ``Settings.external_policies``; a job's own values still win."""
    from leasehold.settings import external_declarations
    names, policies = external_declarations(
        ['images:{"resize": {"timeout_seconds": 2, "max_attempts": 2, '
         '"retry": {"min_backoff_seconds": 0, "max_backoff_seconds": 0}}, "crop": {}}'])
    app = make_app(pools=("default", "images"), external_tasks=names,
                   external_policies=policies)
    api = ApiClient(app)
    job_id = submit(api)
    row = app.store.get(job_id)
    assert (row.timeout_seconds, row.max_attempts, row.retry.max_backoff_seconds) == (2, 2, 0)
    assert app.store.get(submit(api, timeout_seconds=30)).timeout_seconds == 30
    for attempt in (1, 2):
        [job] = [j for j in lease(api, max_jobs=10) if j["job_id"] == job_id]
        assert job["attempt"] == attempt
        clock.advance(3)
        late = api.post(f"/jobs/{job_id}/heartbeat", {"token": job["lease"]["token"]})
        assert late.status == 409
        clock.advance(1)
    ended = shown(api, job_id)
    assert (ended["state"], ended["attempts"], ended["error"]["type"]) == \
        ("DEAD", 2, "AttemptTimeout")


# -- 4. hanging up on a long poll ----------------------------------------------------------

def test_a_job_leased_to_a_caller_that_hung_up_is_handed_back_uncounted(
        remote: Leasehold, api: ApiClient) -> None:
    """Through the API handler, with the request's connection check saying the caller has
    gone by the time the lease is answered."""
    job_id = submit(api)
    checks: list[bool] = []

    def gone() -> bool:  # there while the poll asks, gone when the answer is due
        checks.append(True)
        return len(checks) > 1

    token = CLIENT_GONE.set(gone)
    try:
        reply = api.post("/workers/lease", {"pool": "images", "wait_seconds": 2})
    finally:
        CLIENT_GONE.reset(token)
    assert reply.status == 200 and reply.body["jobs"] == []
    back = shown(api, job_id)
    assert (back["state"], back["attempts"], back["crash_recoveries"]) == ("QUEUED", 0, 0)
    [again] = lease(api)  # at once, from the new message (the old one is stale)
    assert (again["job_id"], again["attempt"]) == (job_id, 1)
    assert lease(api) == []


def test_a_long_poll_whose_caller_hung_up_leases_nothing_through_the_gateway(
        remote: Leasehold, api: ApiClient) -> None:
    """A worker hangs up on a 3 s long poll (``curl --max-time``); a job submitted right
    after is not leased to it: the poll ends when its caller goes, or hands back what it
    took. Once the request's handler has returned, the job waits, unleased and uncounted."""
    import json
    import socket
    import threading

    from leasehold.api.app import handle
    from leasehold.api.context import ApiConfig
    from leasehold.local.gateway import Gateway

    answered = threading.Event()

    def handler(event: dict[str, Any]) -> dict[str, Any]:
        try:
            return handle(remote, event, None, ApiConfig(trust_tenant_header=True))
        finally:
            if event["path"] == "/workers/lease":
                answered.set()

    gateway = Gateway("127.0.0.1", 0, handler)
    threading.Thread(target=gateway.serve_forever, daemon=True).start()
    try:
        host, port = gateway.server_address[:2]
        body = json.dumps({"pool": "images", "wait_seconds": 3}).encode()
        with socket.create_connection((host, port)) as client:
            client.sendall(b"POST /workers/lease HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
                           b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                           % (port, len(body), body))
        job_id = submit(api)  # after the hang-up, while the poll would still wait
        assert answered.wait(30)
    finally:
        gateway.shutdown()
        gateway.server_close()
    back = shown(api, job_id)
    assert (back["state"], back["attempts"], back["crash_recoveries"]) == ("QUEUED", 0, 0)
    [job] = lease(api)
    assert (job["job_id"], job["attempt"]) == (job_id, 1)


def test_a_hand_back_whose_write_answer_was_lost_still_hands_the_job_back(
        remote: Leasehold, api: ApiClient) -> None:
    job_id = submit(api)
    [leased] = leasing.lease(remote, pool="images", tasks=None, max_jobs=1, wait_seconds=0,
                             worker_id="w")
    inject(remote, Fault(target="dynamodb.UpdateItem|dynamodb.TransactWriteItems",
                         kind="lose-raise", times=1))
    leasing.hand_back(remote, leased, "w")
    back = shown(api, job_id)
    assert (back["state"], back["attempts"]) == ("QUEUED", 0)
    [again] = lease(api)  # its message was sent: nothing waits for the sweeper
    assert (again["job_id"], again["attempt"]) == (job_id, 1)


def test_the_lease_speaks_protocol_version_1(api: ApiClient) -> None:
    answered = api.post("/workers/lease", {"pool": "images", "wait_seconds": 0, "protocol": 1})
    assert answered.status == 200 and answered.body["protocol"] == 1
    unsent = api.post("/workers/lease", {"pool": "images", "wait_seconds": 0})
    assert unsent.status == 200 and unsent.body["protocol"] == 1  # version 1 workers send none
    later = api.post("/workers/lease", {"pool": "images", "wait_seconds": 0, "protocol": 2})
    assert later.status == 422 and later.body["error"]["field"] == "protocol"


def test_worker_answers_use_the_job_rows_timestamp_format(api: ApiClient, clock: Any) -> None:
    """One format everywhere (docs/protocol.md, "Timestamps"): ISO-8601 UTC, milliseconds."""
    import re
    stamp = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")
    job_id = submit(api, deadline_seconds=100)
    clock.advance(0.123456)
    [job] = lease(api)
    beat = api.post(f"/jobs/{job_id}/heartbeat", {"token": job["lease"]["token"]}).body
    row = shown(api, job_id)
    for value in (job["lease"]["expires_at"], job["deadline_at"], job["timeout_at"],
                  beat["expires_at"], row["started_at"], row["created_at"]):
        assert stamp.fullmatch(value), value


# -- workers are visible --------------------------------------------------------------------

def test_a_remote_worker_is_listed_with_its_pool_last_lease_and_jobs(
        remote: Leasehold, api: ApiClient, clock: Any) -> None:
    job_id = submit(api)
    lease(api, worker_id="go-1", max_jobs=5)
    [worker] = [w for w in api.get("/workers", tenant="acme").body["workers"]
                if w["worker_id"] == "go-1"]
    assert (worker["kind"], worker["pool"], worker["current_jobs"], worker["processed"]) == \
        ("remote", "images", [job_id], 1)
    lease(api, worker_id="go-1")  # an empty poll: still listed, still holding the job
    [worker] = [w for w in api.get("/workers", tenant="acme").body["workers"]
                if w["worker_id"] == "go-1"]
    assert (worker["current_jobs"], worker["processed"]) == ([job_id], 1)
    clock.advance(4 * remote.settings.lease_seconds)  # quiet for three intervals: gone
    assert [w for w in api.get("/workers", tenant="acme").body["workers"]
            if w["worker_id"] == "go-1"] == []


def held_by(api: ApiClient, worker_id: str) -> list[str]:
    [worker] = [w for w in api.get("/workers", tenant="acme").body["workers"]
                if w["worker_id"] == worker_id]
    return sorted(worker["current_jobs"])


def test_a_remote_worker_holding_several_leases_shows_every_job_in_hand_until_each_ends(
        remote: Leasehold, api: ApiClient, clock: Any) -> None:
    """Jobs in hand are every lease the worker holds, not its last lease request's: a worker
    leases one job per request as slots free up, and polls with jobs in hand."""
    done, cancelled, failed, lost, kept = (submit(api) for _ in range(5))
    leases = {}
    for _ in range(5):
        [job] = lease(api, worker_id="go-2")
        leases[job["job_id"]] = job["lease"]["token"]
    assert held_by(api, "go-2") == sorted(leases)
    lease(api, worker_id="go-2")  # an empty poll with five in hand
    assert held_by(api, "go-2") == sorted(leases)
    assert api.post(f"/jobs/{done}/complete", {"token": leases[done], "result": 1}).status == 200
    assert api.delete(f"/jobs/{cancelled}", tenant="acme").status == 200
    beat = api.post(f"/jobs/{cancelled}/heartbeat", {"token": leases[cancelled]})
    assert beat.body["cancel_requested"] is True
    assert api.post(f"/jobs/{failed}/fail", {"token": leases[failed],
                                             "error": {"type": "Oops"}}).status == 200
    assert held_by(api, "go-2") == sorted([lost, kept])
    # One lease taken over while the worker kept the other alive: its late heartbeat is
    # told (409), and it holds that job no more.
    settings = remote.settings
    clock.advance(settings.lease_seconds * 0.6)
    assert api.post(f"/jobs/{kept}/heartbeat", {"token": leases[kept]}).status == 200
    clock.advance(settings.lease_seconds * 0.4 + settings.skew_grace_seconds + 1)
    sweeper.sweep(remote)
    assert api.post(f"/jobs/{lost}/heartbeat", {"token": leases[lost]}).status == 409
    assert held_by(api, "go-2") == [kept]


def test_a_finish_whose_jobs_in_hand_update_fails_is_still_recorded_and_answered(
        remote: Leasehold, api: ApiClient) -> None:
    """The view is best effort: the coordination table refusing the update (failing past
    botocore's retries) neither fails the finish nor changes its answer."""
    job_id = submit(api)
    [job] = lease(api, worker_id="go-3")
    inject(remote, Fault(target="dynamodb.UpdateItem", kind="fail", times=None,
                         when=lambda body: body.get("TableName")
                         == remote.settings.coordination_table))
    reply = api.post(f"/jobs/{job_id}/complete", {"token": job["lease"]["token"], "result": 7})
    assert (reply.status, reply.body["state"], reply.body["result"]) == (200, "SUCCEEDED", 7)
    assert held_by(api, "go-3") == [job_id]  # the refused update: shown held a while longer


def test_the_leased_job_carries_the_trace_context_it_was_submitted_in(api: ApiClient) -> None:
    parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    reply = api.post("/jobs", {"task": "resize", "payload": {}}, tenant="acme",
                     headers={"traceparent": parent, "tracestate": "vendor=x"})
    [job] = lease(api)
    assert job["job_id"] == reply.body["job_id"] and job["traceparent"] == parent
    submit(api)
    [untraced] = lease(api)
    assert untraced["traceparent"] is None
