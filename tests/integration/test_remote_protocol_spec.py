"""What docs/protocol.md tells a worker author that the disagreement tests
(test_remote_protocol.py) do not show: each test is one statement of the spec, checked
through the API handler as API Gateway would deliver the request."""

from __future__ import annotations

from typing import Any

import pytest

from leasehold.lifecycle.app import Leasehold
from tests.integration.api_client import ApiClient
from tests.integration.test_remote_protocol import EXTERNAL, held_by, lease, shown, submit


@pytest.fixture
def remote(make_app: Any) -> Leasehold:
    return make_app(pools=("default", "images"), external_tasks=EXTERNAL)


@pytest.fixture
def api(remote: Leasehold) -> ApiClient:
    return ApiClient(remote)


def test_a_heartbeat_whose_progress_is_over_its_limit_is_refused_and_ends_nothing(
        api: ApiClient) -> None:
    """"Sizes": progress over 16 KiB answers 413 and the lease is not extended; the job is
    still the worker's, and a heartbeat without it carries on."""
    job_id = submit(api)
    [job] = lease(api, worker_id="w-progress")
    token = job["lease"]["token"]
    big = api.post(f"/jobs/{job_id}/heartbeat", {"token": token, "progress": "x" * 17000})
    assert (big.status, big.body["error"]["code"]) == (413, "payload_too_large")
    assert shown(api, job_id)["state"] == "RUNNING"
    assert held_by(api, "w-progress") == [job_id]
    assert api.post(f"/jobs/{job_id}/heartbeat", {"token": token}).status == 200


def test_a_finish_sent_while_a_cancel_is_pending_ends_the_job_cancelled(
        api: ApiClient) -> None:
    """"Cancellation": a cancel requested after the lease's last heartbeat wins over its
    finish: 200 with the CANCELLED job, the result not kept."""
    job_id = submit(api)
    [job] = lease(api)
    assert api.delete(f"/jobs/{job_id}", tenant="acme").status == 200
    done = api.post(f"/jobs/{job_id}/complete", {"token": job["lease"]["token"],
                                                 "result": {"kept": True}})
    assert (done.status, done.body["state"], done.body["result"]) == (200, "CANCELLED", None)


def test_tasks_of_another_pool_lease_nothing_and_an_empty_list_means_every_task(
        api: ApiClient) -> None:
    """"Lease": ``tasks`` only narrows; a name the pool does not have is never leased and
    is no error; an empty list is the same as none."""
    job_id = submit(api, task="crop")
    assert lease(api, tasks=["resize", "not.in.this.pool"]) == []
    assert [j["job_id"] for j in lease(api, tasks=[])] == [job_id]


def test_a_body_that_is_not_json_is_a_400(api: ApiClient) -> None:
    """"Status codes": 400 for a body that cannot be read, before any lease."""
    reply = api.call("POST", "/workers/lease", raw="{not json")
    assert (reply.status, reply.body["error"]["code"]) == (400, "bad_request")


def test_a_field_the_server_does_not_know_is_not_refused(api: ApiClient) -> None:
    """"Routes": a later version's field sent to this server is ignored."""
    job_id = submit(api)
    [job] = lease(api, later_field={"any": 1})
    assert job["job_id"] == job_id
    done = api.post(f"/jobs/{job_id}/complete", {"token": job["lease"]["token"], "result": 1,
                                                 "later_field": True})
    assert (done.status, done.body["state"]) == (200, "SUCCEEDED")


def test_a_failure_of_type_non_retryable_error_is_final_whatever_retryable_says(
        api: ApiClient) -> None:
    """"Routes", Fail: the type ``NonRetryableError`` ends the job DEAD at once, as
    ``retryable: false`` does."""
    job_id = submit(api, max_attempts=5)
    [job] = lease(api)
    failed = api.post(f"/jobs/{job_id}/fail", {"token": job["lease"]["token"], "retryable": True,
                                               "error": {"type": "NonRetryableError"}})
    assert (failed.status, failed.body["state"], failed.body["attempts"]) == (200, "DEAD", 1)


def test_a_heartbeat_after_the_finish_is_recorded_answers_409_and_the_finish_again_200(
        api: ApiClient) -> None:
    """"Idempotent finishes": a 409 to a heartbeat sent while a finish is retried does not
    mean the finish failed; the finish's own answer says."""
    job_id = submit(api)
    [job] = lease(api)
    token = job["lease"]["token"]
    assert api.post(f"/jobs/{job_id}/complete", {"token": token, "result": 2}).status == 200
    late = api.post(f"/jobs/{job_id}/heartbeat", {"token": token})
    assert (late.status, late.body["error"]["code"]) == (409, "lease_lost")
    again = api.post(f"/jobs/{job_id}/complete", {"token": token, "result": 2})
    assert (again.status, again.body["state"], again.body["result"]) == (200, "SUCCEEDED", 2)


def test_a_fail_body_over_the_request_limit_is_413_and_records_nothing(api: ApiClient) -> None:
    """"Sizes": a fail over 320 KiB is refused unread; the lease is still the worker's."""
    job_id = submit(api)
    [job] = lease(api)
    token = job["lease"]["token"]
    big = api.post(f"/jobs/{job_id}/fail", {"token": token, "error": {
        "type": "Oops", "message": "\u2603" * 60000}})
    assert big.status == 413 and shown(api, job_id)["state"] == "RUNNING"
    short = api.post(f"/jobs/{job_id}/fail", {"token": token, "retryable": False,
                                              "error": {"type": "Oops", "message": "cut"}})
    assert (short.status, short.body["state"]) == (200, "DEAD")
