"""Workers in any language (issue 34): the lease protocol over HTTP, in-process.

Every request goes through the API handler as API Gateway would deliver it; the jobs are
leased, heartbeated and finished by the lifecycle's own code (``leasehold.remote``)."""

from __future__ import annotations

import time
from typing import Any

import pytest

from leasehold.api.context import ApiConfig
from leasehold.aws.faults import Fault
from leasehold.lifecycle import sweeper
from leasehold.lifecycle.app import Leasehold
from leasehold.tenancy.limits import Limits
from tests.integration.api_client import ApiClient
from tests.integration.helpers import inject

EXTERNAL = {"images": ("resize", "crop")}


@pytest.fixture
def remote(make_app: Any) -> Leasehold:
    return make_app(pools=("default", "images"), external_tasks=EXTERNAL)


@pytest.fixture
def api(remote: Leasehold) -> ApiClient:
    return ApiClient(remote)


def submit(api: ApiClient, task: str = "resize", tenant: str = "acme", **extra: Any) -> str:
    reply = api.post("/jobs", {"task": task, "payload": {"n": 1}, **extra}, tenant=tenant)
    assert reply.status == 201, reply.body
    return str(reply.body["job_id"])


def lease(api: ApiClient, **body: Any) -> list[dict[str, Any]]:
    reply = api.post("/workers/lease", {"pool": "images", "wait_seconds": 0, **body})
    assert reply.status == 200, reply.body
    return list(reply.body["jobs"])


def test_external_tasks_are_accepted_in_their_pool(api: ApiClient) -> None:
    job_id = submit(api)
    assert api.get(f"/jobs/{job_id}", tenant="acme").body["pool"] == "images"
    assert api.post("/jobs", {"task": "nope"}, tenant="acme").status == 422


def test_lease_heartbeat_complete(remote: Leasehold, api: ApiClient, clock: Any) -> None:
    job_id = submit(api)
    [job] = lease(api, worker_id="w-1", max_jobs=5)
    assert (job["job_id"], job["task"], job["payload"], job["attempt"], job["tenant"]) == \
        (job_id, "resize", {"n": 1}, 1, "acme")
    assert job["deadline_at"] is None and job["lease"]["expires_at"].endswith("Z")
    assert api.get(f"/jobs/{job_id}", tenant="acme").body["state"] == "RUNNING"
    token = job["lease"]["token"]
    clock.advance(10)
    beat = api.post(f"/jobs/{job_id}/heartbeat", {"token": token, "progress": {"p": 1}})
    assert beat.status == 200 and beat.body["cancel_requested"] is False
    assert beat.body["expires_at"] > job["lease"]["expires_at"]
    done = api.post(f"/jobs/{job_id}/complete", {"token": token, "result": {"ok": True}})
    assert done.status == 200 and done.body["state"] == "SUCCEEDED"
    assert done.body["result"] == {"ok": True}
    assert lease(api) == []  # the message went with the lease


def test_a_lost_complete_response_is_answered_again(remote: Leasehold, api: ApiClient
                                                    ) -> None:
    job_id = submit(api)
    [job] = lease(api)
    token = job["lease"]["token"]
    # The first answer never reaches the worker (the connection dropped): it sends again.
    first = api.post(f"/jobs/{job_id}/complete", {"token": token, "result": 1})
    assert first.status == 200
    again = api.post(f"/jobs/{job_id}/complete", {"token": token, "result": 1})
    assert again.status == 200 and again.body["state"] == "SUCCEEDED"
    assert again.body["attempts"] == 1 and again.body["result"] == 1
    ended = [h for h in remote.store.get(job_id).history if h.target == "SUCCEEDED"]
    assert len(ended) == 1


def test_a_lost_dynamodb_answer_is_recognised_by_the_finish(remote: Leasehold,
                                                            api: ApiClient) -> None:
    job_id = submit(api)
    [job] = lease(api)
    inject(remote, Fault(target="dynamodb.UpdateItem|dynamodb.TransactWriteItems",
                         kind="lose-raise"))
    done = api.post(f"/jobs/{job_id}/complete", {"token": job["lease"]["token"], "result": 2})
    assert done.status == 200 and done.body["state"] == "SUCCEEDED"


@pytest.mark.parametrize("capped", [True, False])
def test_a_zombie_gets_409_and_changes_nothing(remote: Leasehold, api: ApiClient,
                                               clock: Any, capped: bool) -> None:
    # With or without a cap, a remote worker's job keeps its sweep entry (it is never sent
    # first): the sweeper takes a lost worker's lease over at its end, as the protocol says.
    if not capped:
        api = ApiClient(remote, ApiConfig(trust_tenant_header=True, limits=Limits(max_live=None)))
    job_id = submit(api)
    [first] = lease(api, worker_id="old")
    clock.advance(remote.settings.lease_seconds + remote.settings.skew_grace_seconds + 1)
    assert sweeper.sweep(remote).recovered == 1  # the lease expired: queued again
    [second] = lease(api, worker_id="new")
    assert second["job_id"] == job_id and second["attempt"] == 2
    zombie = first["lease"]["token"]
    for path, body in (("heartbeat", {"token": zombie}),
                       ("complete", {"token": zombie, "result": "late"}),
                       ("fail", {"token": zombie, "error": {"type": "E", "message": "m"}})):
        reply = api.post(f"/jobs/{job_id}/{path}", body)
        assert reply.status == 409 and reply.body["error"]["code"] == "lease_lost", path
    shown = api.get(f"/jobs/{job_id}", tenant="acme").body
    assert shown["state"] == "RUNNING" and shown["attempts"] == 2 and shown["result"] is None
    done = api.post(f"/jobs/{job_id}/complete", {"token": second["lease"]["token"],
                                                 "result": "fresh"})
    assert done.body["result"] == "fresh"


def test_fail_retries_then_dead_and_non_retryable(api: ApiClient, clock: Any) -> None:
    job_id = submit(api, max_attempts=2, retry={"min_backoff_seconds": 0,
                                                 "max_backoff_seconds": 0})
    for attempt in (1, 2):
        clock.advance(2)
        [job] = lease(api)
        assert job["attempt"] == attempt
        failed = api.post(f"/jobs/{job_id}/fail", {"token": job["lease"]["token"],
                                                   "error": {"type": "Boom", "message": "x"}})
        assert failed.status == 200
    shown = api.get(f"/jobs/{job_id}", tenant="acme").body
    assert shown["state"] == "DEAD" and shown["error"]["type"] == "Boom"
    other = submit(api)
    [job] = lease(api)
    final = api.post(f"/jobs/{other}/fail", {"token": job["lease"]["token"], "retryable": False,
                                             "error": {"type": "Bad", "message": "no"}})
    assert final.body["state"] == "DEAD" and final.body["attempts"] == 1


def test_cancel_is_seen_through_the_heartbeat(api: ApiClient) -> None:
    job_id = submit(api)
    [job] = lease(api)
    assert api.delete(f"/jobs/{job_id}", tenant="acme").status == 200
    beat = api.post(f"/jobs/{job_id}/heartbeat", {"token": job["lease"]["token"]})
    assert beat.body["cancel_requested"] is True
    # A worker that reports anyway: the cancel wins over its result.
    done = api.post(f"/jobs/{job_id}/complete", {"token": job["lease"]["token"], "result": 1})
    assert done.body["state"] == "CANCELLED"


def test_priorities_and_task_filter(api: ApiClient) -> None:
    low = submit(api, priority="low")
    crop = submit(api, task="crop")
    high = submit(api, priority="high")
    # Priority order, as a Python worker's poller (one queue's batch per receive).
    assert [j["job_id"] for j in lease(api, max_jobs=10, tasks=["resize"])] == [high]
    assert [j["job_id"] for j in lease(api, max_jobs=10, tasks=["resize"])] == [low]
    assert lease(api, max_jobs=10, tasks=["resize"]) == []  # crop is not asked for
    [other] = lease(api, max_jobs=10)
    assert other["job_id"] == crop


def test_concurrency_key_holds_for_remote_workers(api: ApiClient) -> None:
    ids = [submit(api, concurrency={"key": "acct", "limit": 2}) for _ in range(4)]
    leased = lease(api, max_jobs=10) + lease(api, max_jobs=10)
    assert len(leased) == 2  # the others are parked on the key
    for job in leased:
        api.post(f"/jobs/{job['job_id']}/complete", {"token": job["lease"]["token"]})
    woken = lease(api, max_jobs=10)
    assert len(woken) == 2 and {j["job_id"] for j in leased + woken} == set(ids)


def test_the_long_poll_waits_then_answers_empty(api: ApiClient) -> None:
    started = time.monotonic()
    reply = api.post("/workers/lease", {"pool": "images", "wait_seconds": 1})
    assert reply.status == 200 and reply.body == {"jobs": [], "protocol": 1}
    assert 0.9 <= time.monotonic() - started < 5


def test_bad_lease_requests_are_refused(api: ApiClient) -> None:
    assert api.post("/workers/lease", {"pool": "nope", "wait_seconds": 0}).status == 422
    assert api.post("/workers/lease", {"pool": "images", "max_jobs": 11}).status == 422
    assert api.post("/jobs/abc/heartbeat", {"token": "x"}).status == 404


def _iam_event(arn: str, path: str, body: str) -> dict[str, Any]:
    from leasehold.local.gateway import proxy_event
    event = proxy_event("POST", path, {"Content-Type": "application/json"}, body)
    event["requestContext"] = {**event.get("requestContext", {}),
                               "identity": {"userArn": arn}}
    return event


def test_only_a_granted_principal_may_work_on_a_pool(remote: Leasehold, api: ApiClient
                                                     ) -> None:
    import json
    job_id = submit(api)
    worker = "arn:aws:sts::123456789012:assumed-role/ImagesWorker/s1"
    other = "arn:aws:sts::123456789012:assumed-role/VideoWorker/s1"
    tenant = "arn:aws:sts::123456789012:assumed-role/TenantApp/s1"
    gated = ApiClient(remote, ApiConfig.from_env({"LEASEHOLD_WORKER_MAP": json.dumps({
        "arn:aws:iam::123456789012:role/ImagesWorker": ["images"],
        "arn:aws:iam::123456789012:role/VideoWorker": ["video"]})}))
    body = json.dumps({"pool": "images", "wait_seconds": 0})
    for arn in (tenant, other):
        refused = gated.call("POST", "/workers/lease", event=_iam_event(arn, "/workers/lease",
                                                                        body))
        assert refused.status == 403 and refused.body["error"]["code"] == "forbidden"
    leased = gated.call("POST", "/workers/lease",
                        event=_iam_event(worker, "/workers/lease", body))
    assert leased.status == 200
    [job] = leased.body["jobs"]
    token = json.dumps({"token": job["lease"]["token"], "result": 1,
                        "error": {"type": "E", "message": "m"}})
    for arn in (tenant, other):
        for path in ("heartbeat", "complete", "fail"):
            refused = gated.call("POST", f"/jobs/{job_id}/{path}",
                                 event=_iam_event(arn, f"/jobs/{job_id}/{path}", token))
            assert refused.status == 403, (arn, path)
    done = gated.call("POST", f"/jobs/{job_id}/complete",
                      event=_iam_event(worker, f"/jobs/{job_id}/complete", token))
    assert done.status == 200 and done.body["state"] == "SUCCEEDED"


def test_a_paused_pool_leases_nothing_until_resumed(remote: Leasehold, api: ApiClient) -> None:
    from leasehold.flow.pools import set_paused
    job_id = submit(api)
    set_paused(remote, "images", True)
    assert lease(api, wait_seconds=0.3) == []
    set_paused(remote, "images", False)
    assert [j["job_id"] for j in lease(api)] == [job_id]


def test_a_job_cancelled_before_its_lease_never_starts(api: ApiClient) -> None:
    job_id = submit(api)
    assert api.delete(f"/jobs/{job_id}", tenant="acme").status == 200
    assert lease(api) == []
    assert api.get(f"/jobs/{job_id}", tenant="acme").body["state"] == "CANCELLED"
