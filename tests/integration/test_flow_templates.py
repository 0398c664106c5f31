"""Flow options on jobs made by schedules and triggers (issue 22): they go through the same
intakes as ``POST /jobs``, so a unique key, a debounce window and a start window hold for
them too, and so do the task's own defaults."""

from __future__ import annotations

from typing import Any

import pytest

from leasehold.aws.faults import Fault, FaultInjector
from leasehold.clock import FakeClock
from leasehold.core.registry import TaskRegistry
from leasehold.core.states import JobState
from leasehold.events import triggers
from leasehold.lifecycle import sweeper
from leasehold.lifecycle.app import Leasehold
from tests.integration.api_client import ApiClient
from tests.integration.helpers import deliver


@pytest.fixture
def api(app: Leasehold, registry: TaskRegistry) -> ApiClient:
    registry.task("report")(lambda payload, ctx: payload)
    registry.task("sync", unique={"key": "sync:{payload.account}"})(lambda payload, ctx: 1)
    return ApiClient(app)


def schedule(api: ApiClient, **fields: Any) -> str:
    created = api.post("/schedules", {"cron": "@daily", **fields}, tenant="acme")
    assert created.status == 201, created.body
    return str(created.body["schedule_id"])


def fire(api: ApiClient, schedule_id: str) -> str:
    """A manual run, a second after the last (a manual run's id is derived from its time,
    so two at one instant would be one job whatever the options)."""
    api.app.clock.advance(1)  # type: ignore[attr-defined]
    fired = api.post(f"/schedules/{schedule_id}/trigger", tenant="acme")
    assert fired.status in (200, 201, 202), fired.body
    return str(fired.body["job_id"])


def test_a_unique_schedule_is_answered_by_its_live_run(api: ApiClient) -> None:
    sid = schedule(api, task="report", payload={"v": 1}, unique={"key": "nightly"})
    assert api.get(f"/schedules/{sid}", tenant="acme").body["unique"] == {"key": "nightly"}
    first = fire(api, sid)
    assert fire(api, sid) == first  # the first run is live: no second job
    deliver(api.app)
    assert api.app.store.get(first).state is JobState.SUCCEEDED
    assert fire(api, sid) != first  # it ended: the key is free


def test_a_tasks_unique_default_holds_for_its_scheduled_runs(api: ApiClient) -> None:
    sid = schedule(api, task="sync", payload={"account": "a1"})
    first = fire(api, sid)
    assert fire(api, sid) == first


def test_a_lost_response_on_a_unique_runs_write_still_makes_one_job(api: ApiClient) -> None:
    sid = schedule(api, task="report", payload={}, unique={"key": "k"})
    injector = FaultInjector([Fault(target="dynamodb.TransactWriteItems", kind="lose")])
    injector.install(api.app.clients.dynamodb)
    first = fire(api, sid)
    assert sum(injector.injected.values()) == 1 and fire(api, sid) == first
    rows = api.app.clients.dynamodb.scan(TableName=api.app.settings.jobs_table)["Items"]
    assert len(rows) == 1


def test_a_scheduled_run_not_started_in_its_window_expires(api: ApiClient,
                                                           clock: FakeClock) -> None:
    sid = schedule(api, task="report", payload={}, start_within_seconds=5)
    job = fire(api, sid)
    clock.advance(api.app.settings.handoff_seconds + 60)
    sweeper.sweep(api.app)
    assert api.app.store.get(job).state is JobState.EXPIRED


def test_a_key_over_a_fixed_payload_is_checked_when_the_schedule_is_made(
        api: ApiClient) -> None:
    refused = api.post("/schedules", {"cron": "@daily", "task": "report", "payload": {},
                                      "unique": {"key": "u:{payload.user}"}}, tenant="acme")
    assert refused.status == 422 and "user" in str(refused.body)


def test_debounced_events_make_one_run_with_the_latest_payload(
        api: ApiClient, clock: FakeClock, monkeypatch: pytest.MonkeyPatch) -> None:
    app = api.app
    # moto holds a delayed message for real seconds; this clock is fixed: send at once.
    send = app.queues.send
    monkeypatch.setattr(app.queues, "send", lambda pool, priority, message, delay_seconds=0,
                        **kw: send(pool, priority, message, 0, **kw))
    made = api.post("/triggers", {"pattern": {"source": ["cms"]}, "task": "report",
                                  "input_path": "$.detail",
                                  "debounce": {"key": "doc:{payload.doc}", "seconds": 10}},
                    tenant="acme")
    assert made.status == 201, made.body
    assert made.body["debounce"] == {"key": "doc:{payload.doc}", "seconds": 10.0}
    jobs = [triggers.dispatch(app, {"id": f"e{n}", "source": "cms",
                                    "detail": {"doc": "d1", "edit": n}}, tenant="acme")[0]
            for n in range(3)]
    assert len({job.job_id for job in jobs}) == 1
    clock.advance(11)
    sweeper.sweep(app)
    deliver(app)
    [job] = [app.store.get(jobs[0].job_id)]
    assert (job.state, job.result) == (JobState.SUCCEEDED, {"doc": "d1", "edit": 2})


def test_an_event_whose_payload_lacks_the_key_field_makes_no_job_and_others_still_run(
        api: ApiClient) -> None:
    app = api.app
    for key in ("u:{payload.user}", "all"):
        made = api.post("/triggers", {"pattern": {"source": ["s"]}, "task": "report",
                                      "input_path": "$.detail", "unique": {"key": key}},
                        tenant="acme")
        assert made.status == 201, made.body
    jobs = triggers.dispatch(app, {"id": "e", "source": "s", "detail": {}}, tenant="acme")
    assert [job.extra.get("unique_key") for job in jobs] == ["all"]
