"""The ``publish`` setting (which job state changes become events) and how events are cut
into PutEvents requests."""

from __future__ import annotations

import json

import pytest

from leasehold.core.jobs import Job
from leasehold.core.states import JobState
from leasehold.errors import ValidationError
from leasehold.events.publishing import MAX_REQUEST_BYTES, entry_size, requests, wanted
from leasehold.settings import Settings


def test_publish_is_read_from_the_environment_and_defaults_to_terminal() -> None:
    assert Settings.from_env({}).publish == "terminal"
    settings = Settings.from_env({"LEASEHOLD_PUBLISH": "all"})
    assert settings.publish == "all"
    assert Settings.from_env(settings.to_env()).publish == "all"


def test_an_unknown_publish_value_is_refused_naming_the_variable() -> None:
    with pytest.raises(ValidationError) as raised:
        Settings.from_env({"LEASEHOLD_PUBLISH": "Terminal"})
    assert "LEASEHOLD_PUBLISH" in str(raised.value)
    assert "terminal, all, off" in str(raised.value)


def _job(state: JobState) -> Job:
    return Job(job_id="j", tenant="t", task="x", payload_json="null", pool="default",
               priority="normal", state=state, epoch=1)


@pytest.mark.parametrize(("publish", "expected"), [
    ("all", {"QUEUED", "RUNNING", "SUCCEEDED", "DEAD", "CANCELLED", "SCHEDULED"}),
    ("terminal", {"SUCCEEDED", "DEAD", "CANCELLED"}),
    ("off", set()),
    ("none", set()),  # the old name of off
])
def test_which_changes_each_value_publishes(publish: str, expected: set[str]) -> None:
    changes = [(JobState.QUEUED, None), (JobState.RUNNING, JobState.QUEUED),
               (JobState.SUCCEEDED, JobState.RUNNING), (JobState.DEAD, JobState.RUNNING),
               (JobState.CANCELLED, JobState.QUEUED), (JobState.SCHEDULED, JobState.RUNNING),
               (JobState.RUNNING, JobState.RUNNING)]  # a heartbeat: never a state change
    assert {state.value for state, source in changes
            if wanted(publish, _job(state), source)} == expected


def _entry(detail_bytes: int) -> dict[str, str]:
    return {"Source": "leasehold.job", "DetailType": "Job Succeeded",
            "Detail": json.dumps({"x": "a" * (detail_bytes - 10)})}


def test_requests_hold_at_most_ten_entries_and_256_kb() -> None:
    small = [_entry(200) for _ in range(23)]
    assert [len(r) for r in requests(small)] == [10, 10, 3]
    big = [_entry(100_000) for _ in range(5)]
    cut = list(requests(big))
    assert [len(r) for r in cut] == [2, 2, 1]
    assert all(sum(entry_size(e) for e in r) <= MAX_REQUEST_BYTES for r in cut)
    assert [e for r in cut for e in r] == big  # in order, none lost
