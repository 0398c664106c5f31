"""The test clock of ``leasehold.testing``, used as an application's tests use it: tasks
declared with ``@task``, the ``leasehold`` and ``clock`` fixtures, ``leasehold.advance``, and
the application's own ``Client()``. Time moves only when the test moves it, and what falls
due meanwhile runs once, at its time, in time order."""

from __future__ import annotations

from typing import Any

import pytest

from leasehold import CallbackTimeout, RetryPolicy, advance, task
from leasehold.client import ApiError, Client
from leasehold.testing.clock import TestClock
from leasehold.testing.fixtures import clock, leasehold  # noqa: F401  (as the plugin gives them)
from leasehold.testing.local import LocalLeasehold

#: What the tasks below did, and when by the scheduler's clock: (what, epoch ms).
seen: list[tuple[str, int]] = []
#: The clock the tasks read (the test sets it).
scheduler: list[TestClock] = []


def note(what: str) -> None:
    seen.append((what, scheduler[0].now_ms()))


@pytest.fixture(autouse=True)
def _watch(leasehold: LocalLeasehold) -> None:  # noqa: F811
    seen.clear()
    scheduler[:] = [leasehold.clock]


@task("clock-test.nap")
def nap(payload: Any, ctx: Any) -> Any:
    ctx.step("before", lambda: note("before") or 1)
    ctx.sleep(payload["seconds"])
    note("woke")
    return "rested"


@task("clock-test.note")
def noted(payload: Any, ctx: Any) -> Any:
    note(payload["what"])
    return payload["what"]


@task("clock-test.approval")
def approval(payload: Any, ctx: Any) -> Any:
    cb = ctx.callback("approve", timeout_seconds=3600)
    note("asked")
    try:
        return {"approved": cb.wait()}
    except CallbackTimeout:
        note("timed out")
        return "timed out"


@task("clock-test.flaky", max_attempts=3,
      retry=RetryPolicy(min_backoff_seconds=600, max_backoff_seconds=600))
def flaky(payload: Any, ctx: Any) -> Any:
    note(f"attempt {ctx.attempt}")
    if ctx.attempt == 1:
        raise ConnectionError("the first try fails")
    return ctx.attempt


def test_a_one_hour_durable_sleep_ends_when_the_clock_passes_it(
        leasehold: LocalLeasehold, clock: TestClock) -> None:  # noqa: F811
    start = clock.now_ms()
    job = nap.submit({"seconds": 3600})  # type: ignore[attr-defined]
    assert job.status() == "SLEEPING"
    clock.advance(3599)
    assert job.status() == "SLEEPING" and [what for what, _ in seen] == ["before"]
    advance(1)  # leasehold.advance: the same clock
    assert job.status() == "SUCCEEDED" and job.result() == "rested"
    assert seen == [("before", start), ("woke", start + 3_600_000)]
    assert clock.now_ms() == start + 3_600_000


def test_a_delayed_job_runs_when_its_delay_has_passed_not_before(
        leasehold: LocalLeasehold, clock: TestClock) -> None:  # noqa: F811
    start = clock.now_ms()
    job = noted.submit({"what": "later"}, delay_seconds=3600)  # type: ignore[attr-defined]
    soon = noted.submit({"what": "soon"}, delay_seconds=90.5)  # type: ignore[attr-defined]
    leasehold.advance(90)
    assert (job.status(), soon.status()) == ("SCHEDULED", "QUEUED")
    leasehold.advance(0.5)
    assert soon.status() == "SUCCEEDED" and seen == [("soon", start + 90_500)]
    leasehold.advance(3600 - 90.5 - 0.001)
    assert job.status() == "SCHEDULED" and len(seen) == 1
    leasehold.advance(0.001)
    assert job.status() == "SUCCEEDED" and seen[-1] == ("later", start + 3_600_000)


def test_a_cron_schedule_and_a_sleep_fire_in_time_order_over_one_advance(
        leasehold: LocalLeasehold, clock: TestClock) -> None:  # noqa: F811
    # Five minutes past a ten-minute mark: no fire time ties with the sleep's end.
    clock.advance((300 - clock.now_ms() // 1000 % 600) % 600)
    start = clock.now_ms()
    schedule = Client().create_schedule(cron="*/10 * * * *", task="clock-test.note",
                                        payload={"what": "cron"})
    nap.submit({"seconds": 1800})  # type: ignore[attr-defined]
    clock.advance(3600)
    fires = [("cron", start + 300_000 + n * 600_000) for n in range(6)]
    assert seen == sorted([("before", start), ("woke", start + 1_800_000), *fires],
                          key=lambda entry: entry[1])
    assert [w for w, _ in seen] == ["before", "cron", "cron", "cron", "woke", "cron", "cron",
                                    "cron"]
    runs = Client().list(schedule_id=schedule["schedule_id"], state="SUCCEEDED")["jobs"]
    assert len(runs) == 6


def test_a_callback_times_out_when_the_clock_passes_its_timeout_and_a_completion_wins_before(
        leasehold: LocalLeasehold, clock: TestClock) -> None:  # noqa: F811
    start = clock.now_ms()
    job = approval.submit()  # type: ignore[attr-defined]
    clock.advance(3599)
    assert job.status() == "SLEEPING"
    clock.advance(1)
    assert job.result() == "timed out" and seen[-1] == ("timed out", start + 3_600_000)

    answered = approval.submit()  # type: ignore[attr-defined]
    steps = Client().request("GET", f"/jobs/{answered.job_id}/steps")["steps"]
    clock.advance(1800)
    Client().complete_callback(steps[0]["token"], {"by": "ann"})  # POST /callbacks/{token}
    assert answered.result() == {"approved": {"by": "ann"}}
    clock.advance(3600)  # its timeout passes: nothing more happens
    assert answered.status() == "SUCCEEDED" and seen[-1][0] == "asked"


def test_a_retry_back_off_waits_for_the_clock_and_result_skips_ahead_to_it(
        leasehold: LocalLeasehold, clock: TestClock) -> None:  # noqa: F811
    start = clock.now_ms()
    job = flaky.submit()  # type: ignore[attr-defined]
    assert job.status() == "QUEUED" and seen == [("attempt 1", start)]
    clock.advance(599)
    assert job.status() == "QUEUED"
    clock.advance(1)
    assert job.status() == "SUCCEEDED" and seen[-1] == ("attempt 2", start + 600_000)

    # A wait for the result does not wait 10 minutes: it skips to the back-off's end.
    again = flaky.submit()  # type: ignore[attr-defined]
    assert again.result(timeout=5) == 2
    assert seen[-2:] == [("attempt 1", start + 600_000), ("attempt 2", start + 1_200_000)]


def test_without_skipping_a_wait_for_the_result_leaves_the_clock_alone(
        leasehold: LocalLeasehold, clock: TestClock) -> None:  # noqa: F811
    leasehold.skip_time = False
    start = clock.now_ms()
    job = nap.submit({"seconds": 60})  # type: ignore[attr-defined]
    with pytest.raises(TimeoutError):
        job.result(timeout=0.2)
    assert clock.now_ms() == start and job.status() == "SLEEPING"


def test_throttle_debounce_start_window_and_deadline_follow_the_clock(
        leasehold: LocalLeasehold, clock: TestClock) -> None:  # noqa: F811
    start = clock.now_ms()
    client = Client()
    throttled = [client.submit("clock-test.note", {"what": f"t{n}"}, throttle={
        "key": "slow", "limit": 1, "period_seconds": 3600}) for n in range(2)]
    assert [job.status() for job in throttled] == ["SUCCEEDED", "QUEUED"]
    clock.advance(3599)
    assert throttled[1].status() == "QUEUED"
    clock.advance(1.001)  # the throttle's next turn: a period on, and a millisecond
    assert throttled[1].status() == "SUCCEEDED" and seen[-1] == ("t1", start + 3_600_001)

    debounced = [client.submit("clock-test.note", {"what": f"d{n}"}, debounce={
        "key": "doc", "seconds": 60}) for n in range(3)]
    assert len({job.job_id for job in debounced}) == 1
    clock.advance(59)
    assert debounced[0].status() == "QUEUED"
    clock.advance(1)
    assert debounced[0].result() == "d2" and seen[-1] == ("d2", clock.now_ms())

    client.pause_key("held")
    late = client.submit("clock-test.note", {"what": "never"}, start_within_seconds=120,
                         concurrency={"key": "held", "limit": 1})
    clock.advance(119)
    assert late.status() == "QUEUED"
    clock.advance(60)  # the sweeper ends it once its window has passed
    assert late.status() == "EXPIRED"

    bounded = nap.submit({"seconds": 3600}, deadline_seconds=600)  # type: ignore[attr-defined]
    clock.advance(599)
    assert bounded.status() == "SLEEPING"
    clock.advance(1)
    assert bounded.status() == "DEAD"
    assert bounded.refresh()["error"]["type"] == "DeadlineExceeded"


def test_the_applications_own_client_reaches_the_in_process_scheduler(
        leasehold: LocalLeasehold, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    monkeypatch.setenv("LEASEHOLD_URL", "http://127.0.0.1:9")  # nothing listens there

    def place_order(order: str) -> str:  # application code, unaware of the test
        return Client().submit("clock-test.note", {"what": order}).job_id

    job_id = place_order("o-1")
    assert leasehold.client.job(job_id).result(timeout=5) == "o-1"
    assert Client().get(job_id)["state"] == "SUCCEEDED"
    with pytest.raises(ApiError) as refused:  # a client given a URL still goes there
        Client("http://127.0.0.1:9").get(job_id)
    assert refused.value.status == 0

