import pytest

from leasehold.core.jobs import Job, Transition
from leasehold.core.states import JobState
from leasehold.handlers.telemetry import metric_for

S = JobState


def job(state: JobState, actor: str = "w", **kwargs: int) -> Job:
    return Job(job_id="j", tenant="t", task="x", payload_json="null", pool="default",
               priority="normal", state=state, epoch=1, run_at=1_000,
               history=(Transition(0, "", state.value, actor),), **kwargs)


@pytest.mark.parametrize(
    ("current", "source", "expected"),
    [
        (job(S.QUEUED), None, ("JobsSubmitted", 1)),
        (job(S.SUCCEEDED), S.RUNNING, ("JobsSucceeded", 1)),
        (job(S.DEAD), S.RUNNING, ("JobsDead", 1)),
        (job(S.QUEUED, actor="sweeper"), S.RUNNING, ("LeasesExpired", 1)),
        (job(S.QUEUED, actor="worker-1"), S.RUNNING, ("JobsRetried", 1)),
        (job(S.SCHEDULED, actor="worker-1"), S.RUNNING, ("JobsRetried", 1)),
        (job(S.RUNNING, started_at=1_750), S.QUEUED, ("ScheduleLatenessMs", 750)),
        (job(S.CANCELLED), S.QUEUED, None),
        (job(S.QUEUED), S.QUEUED, None),
    ],
)
def test_each_state_change_feeds_the_metric_the_dashboard_charts(
    current: Job, source: JobState | None, expected: tuple[str, float] | None
) -> None:
    found = metric_for(current, source)
    assert (found[:2] if found else None) == expected
