"""Typed task inputs (issue 31): ``@task(..., input=Model, output=Model)`` checked at the door
on every way a job is made, the model instance given to the handler, the result checked at
the finish, and what a re-run of a job whose payload no longer fits does."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any, Literal

import pytest
from pydantic import BaseModel, ConfigDict, Field

from leasehold.aws.faults import Fault
from leasehold.clock import FakeClock
from leasehold.core.context import JobContext
from leasehold.core.policy import RetryPolicy
from leasehold.core.registry import TaskRegistry
from leasehold.core.spec import JobSpec
from leasehold.core.states import JobState
from leasehold.errors import InvalidInput, ValidationError
from leasehold.events import triggers
from leasehold.lifecycle import control
from leasehold.lifecycle.app import Leasehold
from leasehold.lifecycle.submission import submit
from leasehold.streams.enqueue import enqueue_item
from leasehold.time import schedules
from leasehold.workflows import start_workflow
from leasehold.workflows.model import parse_workflow
from tests.conftest import MakeApp
from tests.integration.api_client import ApiClient, api_for
from tests.integration.combinations import no_delays, rerun
from tests.integration.helpers import deliver, inject, tenant_live
from tests.integration.test_client_operations import client_for

TENANT = "acme"
FAST = RetryPolicy(min_backoff_seconds=0, max_backoff_seconds=0)
BAD = {"amount": "lots", "currency": "EUR"}
BAD_FIELD = "payload.amount"


class ChargeIn(BaseModel):
    amount: int = Field(gt=0)
    currency: Literal["EUR", "USD"] = "EUR"


class ChargeInV2(BaseModel):
    """What a later deploy made of the model: every payload now needs a customer."""

    amount: int
    customer: str


class ChargeOut(BaseModel):
    charged: int
    receipt: str


def rows(app: Leasehold) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = app.clients.dynamodb.scan(
        TableName=app.settings.jobs_table)["Items"]
    return items


@pytest.fixture
def seen() -> list[Any]:
    """What each run of ``charge`` was given."""
    return []


@pytest.fixture
def app(make_app: MakeApp, registry: TaskRegistry, seen: list[Any]) -> Leasehold:
    @registry.task("charge", input=ChargeIn, output=ChargeOut, retry=FAST, max_attempts=3)
    def charge(payload: ChargeIn, ctx: JobContext) -> Any:
        seen.append(payload)
        if payload.amount == 13:
            return {"charged": "unlucky"}  # does not fit ChargeOut
        return ChargeOut(charged=payload.amount, receipt=f"r-{payload.amount}")

    @registry.task("charge-later", input=ChargeIn, retry=FAST)
    def charge_later(payload: ChargeIn, ctx: JobContext) -> Any:
        seen.append(payload)
        ctx.sleep(3600)  # past SQS's longest delay: the ticker wakes it
        seen.append(payload)
        return payload.amount

    @registry.task("anything")
    def anything(payload: Any, ctx: JobContext) -> Any:
        return payload

    @registry.task("parent", retry=FAST, max_attempts=1)
    def parent(payload: Any, ctx: JobContext) -> Any:
        return ctx.spawn("charge", payload)

    return make_app()


@pytest.fixture
def api(app: Leasehold) -> ApiClient:
    return api_for(app, max_live=5)


def change_model(app: Leasehold, task: str, model: type) -> None:
    """A deploy that changed the task's input model (same handler, new model)."""
    app.registry.register(replace(app.registry.get(task), input=model))


def assert_refused(reply: Any, field: str = BAD_FIELD) -> None:
    assert reply.status == 422, reply.body
    error = reply.body["error"]
    assert error["code"] == "validation_error"
    assert error["field"] == field
    assert error["message"].startswith(f"{field}: Input should be a valid integer")


# -- the door: every way a job is made ---------------------------------------------------------

def test_post_jobs_refuses_a_wrong_shape_naming_the_field_and_writes_nothing(
        app: Leasehold, api: ApiClient) -> None:
    assert_refused(api.post("/jobs", {"task": "charge", "payload": BAD}, tenant=TENANT))
    missing = api.post("/jobs", {"task": "charge", "payload": {}}, tenant=TENANT)
    assert missing.status == 422
    assert missing.body["error"]["message"] == "payload.amount: Field required"
    assert rows(app) == []
    assert tenant_live(app, TENANT) == 0  # no live-job slot taken
    ok = api.post("/jobs", {"task": "charge", "payload": {"amount": 5}}, tenant=TENANT)
    assert ok.status == 201, ok.body
    assert tenant_live(app, TENANT) == 1
    # An untyped task still takes any JSON.
    assert api.post("/jobs", {"task": "anything", "payload": BAD}, tenant=TENANT).status == 201


def test_the_client_gets_the_422_naming_the_field(app: Leasehold) -> None:
    from leasehold.client import ApiError

    client = client_for(app, TENANT)
    with pytest.raises(ApiError) as refused:
        client.submit("charge", BAD)
    assert (refused.value.status, refused.value.field) == (422, BAD_FIELD)
    # The one documented error, whichever path the submission takes (issue 47): the client's
    # refusal is the InvalidInput the library raises, with the same field and message.
    assert isinstance(refused.value, InvalidInput)
    assert f"{BAD_FIELD}: Input should be a valid integer" in str(refused.value)
    with pytest.raises(InvalidInput, match=BAD_FIELD):
        client.submit("charge", BAD)
    with pytest.raises(ApiError) as other:  # a refusal that is not the payload's
        client.submit("charge", {"amount": 7}, priority="urgent")
    assert other.value.status == 422 and not isinstance(other.value, InvalidInput)
    assert isinstance(other.value, ValidationError) and other.value.field == "priority"
    assert rows(app) == []
    handle = client.submit("charge", {"amount": 7})
    deliver(app)
    assert handle.result(timeout=0) == {"charged": 7, "receipt": "r-7"}


def test_the_library_submission_raises_a_typed_error_with_the_same_message(
        app: Leasehold) -> None:
    with pytest.raises(InvalidInput) as refused:
        submit(app, JobSpec(task="charge", payload=BAD, tenant=TENANT))
    assert refused.value.field == BAD_FIELD
    assert str(refused.value).startswith(f"{BAD_FIELD}: Input should be a valid integer")
    with pytest.raises(InvalidInput, match=BAD_FIELD):
        enqueue_item(app, "charge", BAD, tenant=TENANT)
    assert rows(app) == []


def test_a_schedule_is_refused_at_creation(app: Leasehold, api: ApiClient) -> None:
    assert_refused(api.post("/schedules", {"cron": "@daily", "task": "charge", "payload": BAD},
                            tenant=TENANT))
    with pytest.raises(InvalidInput, match=BAD_FIELD):
        schedules.create(app, {"cron": "@daily", "task": "charge", "payload": BAD},
                         tenant=TENANT)
    assert api.get("/schedules", tenant=TENANT).body["schedules"] == []


def test_a_trigger_with_a_fixed_payload_is_refused_at_creation(
        app: Leasehold, api: ApiClient) -> None:
    assert_refused(api.post("/triggers", {"task": "charge", "payload": BAD,
                                          "pattern": {"source": ["shop"]}}, tenant=TENANT))
    assert triggers.list_triggers(app, TENANT) == []


def test_a_workflow_is_refused_at_submission_naming_the_step_and_field(
        app: Leasehold, api: ApiClient) -> None:
    reply = api.post("/workflows", {"steps": [
        {"id": "ok", "task": "charge", "payload": {"amount": 1}},
        {"id": "bad", "task": "charge", "payload": BAD, "depends_on": ["ok"]}]}, tenant=TENANT)
    assert reply.status == 422, reply.body
    assert reply.body["error"]["field"] == "steps[1].payload.amount"
    assert "step 'bad': Input should be a valid integer" in reply.body["error"]["message"]
    assert rows(app) == []
    with pytest.raises(InvalidInput, match=r"steps\[1\]\.payload\.amount"):
        start_workflow(app, parse_workflow({"steps": [
            {"id": "ok", "task": "charge", "payload": {"amount": 1}},
            {"id": "bad", "task": "charge", "payload": BAD}]}, tenant=TENANT))
    assert rows(app) == []


def test_a_spawn_with_a_wrong_shape_fails_the_parent_and_makes_no_child(
        app: Leasehold, api: ApiClient) -> None:
    parent = api.post("/jobs", {"task": "parent", "payload": BAD}, tenant=TENANT).body["job_id"]
    deliver(app)
    job = app.store.get(parent)
    assert job.state is JobState.DEAD
    assert job.error is not None and job.error.type == "InvalidInput"
    assert job.error.message.startswith(f"{BAD_FIELD}: Input should be a valid integer")
    assert [r["job_id"]["S"] for r in rows(app)] == [parent]  # no child row


# -- the handler gets the model; the result is checked -----------------------------------------

def test_the_handler_receives_the_model_and_the_result_is_stored_as_its_json(
        app: Leasehold, api: ApiClient, seen: list[Any]) -> None:
    job_id = api.post("/jobs", {"task": "charge", "payload": {"amount": 5}},
                      tenant=TENANT).body["job_id"]
    deliver(app)
    assert seen == [ChargeIn(amount=5, currency="EUR")]
    job = app.store.get(job_id)
    assert job.state is JobState.SUCCEEDED
    assert job.result == {"charged": 5, "receipt": "r-5"}
    assert job.payload == {"amount": 5}  # stored as submitted


def test_a_result_that_does_not_fit_its_output_model_fails_at_once_naming_the_field(
        app: Leasehold, api: ApiClient, seen: list[Any]) -> None:
    job_id = api.post("/jobs", {"task": "charge", "payload": {"amount": 13}},
                      tenant=TENANT).body["job_id"]
    deliver(app)
    job = app.store.get(job_id)
    assert job.state is JobState.DEAD
    assert len(seen) == 1  # max_attempts=3, yet no retry: no retry can fix it
    assert job.error is not None and job.error.type == "InvalidResult"
    assert job.error.message.startswith("result.charged: Input should be a valid integer")
    # The row keeps an excerpt; the whole message is the job view's (its kept item).
    shown = api.get(f"/jobs/{job_id}", tenant=TENANT).body["error"]
    assert shown["message"].startswith("result.charged: Input should be a valid integer")
    assert "result.receipt: Field required" in shown["message"]


def test_a_durable_replay_gets_the_same_model(app: Leasehold, api: ApiClient, seen: list[Any],
                                              clock: FakeClock) -> None:
    job_id = api.post("/jobs", {"task": "charge-later", "payload": {"amount": 4}},
                      tenant=TENANT).body["job_id"]
    deliver(app)
    assert app.store.get(job_id).state is JobState.SLEEPING
    clock.advance(3600)
    from leasehold.time import ticker

    ticker.promote_due(app)
    deliver(app)
    assert app.store.get(job_id).state is JobState.SUCCEEDED
    assert seen == [ChargeIn(amount=4)] * 3  # the first run, then the replay up to the end


# -- jobs made where no caller can be answered -------------------------------------------------

def test_an_event_that_does_not_fit_is_kept_as_a_dead_job_naming_the_field(
        app: Leasehold, api: ApiClient, seen: list[Any]) -> None:
    trigger = api.post("/triggers", {"task": "charge", "input_path": "$.detail",
                                     "pattern": {"source": ["shop"]}}, tenant=TENANT)
    assert trigger.status == 201, trigger.body
    jobs = triggers.dispatch(app, {"source": "shop", "detail": BAD}, tenant=TENANT)
    good = triggers.dispatch(app, {"source": "shop", "detail": {"amount": 2}}, tenant=TENANT)
    deliver(app)
    bad = app.store.get(jobs[0].job_id)
    assert bad.state is JobState.DEAD
    assert bad.payload == BAD  # the event is not lost
    assert bad.error is not None and bad.error.type == "InvalidPayload"
    assert bad.error.message.startswith(f"{BAD_FIELD}: Input should be a valid integer")
    assert bad.attempt == 1  # never retried
    assert app.store.get(good[0].job_id).state is JobState.SUCCEEDED
    assert seen == [ChargeIn(amount=2)]  # the handler never saw the bad one
    dead = api.get("/dead-letters", tenant=TENANT).body
    assert [j["job_id"] for j in dead["jobs"]] == [bad.job_id]


def test_a_schedule_run_whose_payload_no_longer_fits_ends_dead_naming_the_field(
        app: Leasehold, api: ApiClient, seen: list[Any]) -> None:
    schedule = schedules.create(app, {"cron": "@daily", "task": "charge",
                                      "payload": {"amount": 3}}, tenant=TENANT)
    change_model(app, "charge", ChargeInV2)  # a deploy after the schedule was written
    run = schedules.trigger(app, schedule.schedule_id, TENANT)
    deliver(app)
    job = app.store.get(run.job_id if hasattr(run, "job_id") else run["job_id"])
    assert job.state is JobState.DEAD
    assert job.error is not None and job.error.type == "InvalidPayload"
    assert job.error.message == "payload.customer: Field required"
    assert seen == []


# -- re-runs: the stored payload against the model deployed now --------------------------------

@pytest.mark.parametrize("path", ["manual retry", "redrive", "bulk retry"])
def test_a_re_run_takes_the_model_deployed_now(app: Leasehold, api: ApiClient, seen: list[Any],
                                               clock: FakeClock, path: str) -> None:
    job_id = api.post("/jobs", {"task": "charge", "payload": {"amount": 9},
                                "labels": {"rerun": "yes"}}, tenant=TENANT).body["job_id"]
    change_model(app, "charge", ChargeInV2)
    deliver(app)
    job = app.store.get(job_id)
    assert (job.state, job.attempt, seen) == (JobState.DEAD, 1, [])  # not retried
    assert job.error is not None and job.error.message == "payload.customer: Field required"

    # Re-run under the model that still does not fit: it ends DEAD again, the handler unrun.
    rerun(app, api, clock, path, [job_id])
    deliver(app)
    assert app.store.get(job_id).state is JobState.DEAD
    assert seen == []

    # A deploy that fits the stored payload again: the re-run runs it, with that model.
    change_model(app, "charge", ChargeIn)
    rerun(app, api, clock, path, [job_id])
    deliver(app)
    assert app.store.get(job_id).state is JobState.SUCCEEDED
    assert seen == [ChargeIn(amount=9)]


def test_a_workflow_retry_re_runs_its_step_with_the_model_deployed_now(
        app: Leasehold, api: ApiClient, seen: list[Any]) -> None:
    workflow = api.post("/workflows", {"steps": [
        {"id": "pay", "task": "charge", "payload": {"amount": 8}}]}, tenant=TENANT).body
    change_model(app, "charge", ChargeInV2)
    deliver(app)
    step = api.get(f"/workflows/{workflow['workflow_id']}", tenant=TENANT).body
    assert step["state"] == "FAILED", step
    change_model(app, "charge", ChargeIn)
    retried = api.post(f"/workflows/{workflow['workflow_id']}/retry", tenant=TENANT)
    assert retried.status == 200, retried.body
    deliver(app)
    assert api.get(f"/workflows/{workflow['workflow_id']}",
                   tenant=TENANT).body["state"] == "SUCCEEDED"
    assert seen == [ChargeIn(amount=8)]


def test_an_automatic_retry_gets_the_same_model(make_app: MakeApp, registry: TaskRegistry
                                                ) -> None:
    seen: list[Any] = []

    @registry.task("flaky", input=ChargeIn, retry=FAST, max_attempts=2)
    def flaky(payload: ChargeIn, ctx: JobContext) -> Any:
        seen.append(payload)
        if ctx.attempt == 1:
            raise RuntimeError("once")
        return payload.amount

    app = make_app()
    job = submit(app, JobSpec(task="flaky", payload={"amount": 2}, tenant=TENANT)).job
    deliver(app)
    deliver(app)
    assert app.store.get(job.job_id).state is JobState.SUCCEEDED
    assert seen == [ChargeIn(amount=2)] * 2


# -- faults: validation writes nothing, so a lost answer is the write's own --------------------

def test_a_valid_typed_job_whose_answer_is_lost_is_created_once(
        app: Leasehold, monkeypatch: pytest.MonkeyPatch) -> None:
    no_delays(app, monkeypatch)  # the replay's hand-off is due after a grace (fixed clock)
    client = client_for(app, TENANT)
    injector = inject(app, Fault(target="dynamodb.PutItem|dynamodb.TransactWriteItems",
                                 kind="lose-raise",
                                 when=lambda params: app.settings.jobs_table in json.dumps(
                                     params)))
    handle = client.submit("charge", {"amount": 6})
    assert sum(injector.injected.values()) == 1
    assert [r["job_id"]["S"] for r in rows(app)] == [handle.job_id]
    deliver(app)
    assert control.get_job(app, handle.job_id, TENANT).result == {"charged": 6,
                                                                  "receipt": "r-6"}


def test_a_throttled_write_after_validation_still_makes_one_job(app: Leasehold,
                                                                api: ApiClient) -> None:
    injector = inject(app, Fault(target="dynamodb.PutItem|dynamodb.TransactWriteItems",
                                 kind="throttle", times=2))
    reply = api.post("/jobs", {"task": "charge", "payload": {"amount": 6}}, tenant=TENANT)
    assert reply.status == 201, reply.body
    assert sum(injector.injected.values()) == 2
    assert [r["job_id"]["S"] for r in rows(app)] == [reply.body["job_id"]]


def test_the_cli_submission_is_refused_naming_the_field(
        app: Leasehold, capsys: pytest.CaptureFixture[str]) -> None:
    import threading

    from leasehold.api.app import handle
    from leasehold.api.context import ApiConfig
    from leasehold.cli import main
    from leasehold.local.gateway import Gateway

    config = ApiConfig(trust_tenant_header=True)
    gateway = Gateway("127.0.0.1", 0, lambda event: handle(app, event, None, config))
    threading.Thread(target=gateway.serve_forever, daemon=True).start()
    try:
        code = main(["submit", "charge", json.dumps(BAD), "--url", gateway.url,
                     "--tenant", TENANT])
    finally:
        gateway.shutdown()
        gateway.server_close()
    assert code != 0
    assert f"{BAD_FIELD}: Input should be a valid integer" in capsys.readouterr().err
    assert rows(app) == []


# -- the published schemas -----------------------------------------------------------------------

def test_get_tasks_publishes_each_tasks_pool_and_schemas_the_same_for_every_tenant(
        app: Leasehold, api: ApiClient) -> None:
    listed = api.get("/tasks", tenant=TENANT)
    assert listed.status == 200, listed.body
    by_name = {t["name"]: t for t in listed.body["tasks"]}
    assert "leasehold.bulk" in app.registry  # registered, yet not published
    assert sorted(by_name) == ["anything", "charge", "charge-later", "parent"]
    charge = by_name["charge"]
    assert charge["pool"] == "default"
    assert charge["input"] == ChargeIn.model_json_schema()
    assert charge["output"] == ChargeOut.model_json_schema(mode="serialization")
    assert by_name["anything"]["input"] is None and by_name["anything"]["output"] is None
    assert api.get("/tasks", tenant="other").body == listed.body
    one = api.get("/tasks/charge", tenant=TENANT)
    assert one.status == 200 and one.body == charge


@pytest.mark.parametrize("name", ["nope", "leasehold.bulk"])
def test_an_unknown_or_internal_task_is_a_404_in_the_error_shape(
        api: ApiClient, name: str) -> None:
    reply = api.get(f"/tasks/{name}", tenant=TENANT)
    assert reply.status == 404, reply.body
    assert reply.body["error"]["code"] == "not_found"
    assert name in reply.body["error"]["message"]


class StrictChargeIn(BaseModel):
    model_config = ConfigDict(strict=True)
    amount: int = Field(gt=0)


def test_a_model_s_own_mode_decides_whether_a_numeric_string_fits(
        app: Leasehold, api: ApiClient) -> None:
    """The API's own fields are strict; a task's payload is validated as its model says
    (issue 47's friction: "10" fitted an int while the docs said types were strict). By
    default pydantic's lax mode: "10" is 10; a model that sets ``strict=True`` refuses it."""
    made = api.post("/jobs", {"task": "charge", "payload": {"amount": "10"}}, tenant=TENANT)
    assert made.status == 201, made.body
    change_model(app, "charge", StrictChargeIn)
    refused = api.post("/jobs", {"task": "charge", "payload": {"amount": "10"}}, tenant=TENANT)
    assert refused.status == 422 and refused.body["error"]["field"] == "payload.amount"
    assert api.post("/jobs", {"task": "charge", "payload": {"amount": 10}},
                    tenant=TENANT).status == 201
