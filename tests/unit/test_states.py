import itertools

import pytest

from leasehold.core.states import INITIAL, TERMINAL, JobState, allowed, check
from leasehold.errors import InvalidTransition

S = JobState

# The whole table, written out independently of states.TRANSITIONS: every pair not listed
# here must be refused.
EXPECTED = {
    (S.SCHEDULED, S.QUEUED), (S.SCHEDULED, S.CANCELLED),
    (S.WAITING, S.QUEUED), (S.WAITING, S.CANCELLED),
    (S.QUEUED, S.RUNNING), (S.QUEUED, S.QUEUED), (S.QUEUED, S.CANCELLED),
    (S.RUNNING, S.SUCCEEDED), (S.RUNNING, S.QUEUED), (S.RUNNING, S.SCHEDULED),
    (S.RUNNING, S.DEAD), (S.RUNNING, S.CANCELLED),
    (S.DEAD, S.QUEUED), (S.CANCELLED, S.QUEUED),
    (S.RUNNING, S.SLEEPING), (S.SLEEPING, S.RUNNING), (S.SLEEPING, S.QUEUED),
    (S.SLEEPING, S.CANCELLED),
}


@pytest.mark.parametrize(("source", "target"), list(itertools.product(JobState, JobState)))
def test_every_pair_of_states_is_allowed_exactly_when_the_design_allows_it(
    source: JobState, target: JobState
) -> None:
    assert allowed(source, target) is ((source, target) in EXPECTED)
    if (source, target) in EXPECTED:
        check(source, target)
    else:
        with pytest.raises(InvalidTransition):
            check(source, target)


def test_succeeded_is_final_and_only_manual_retries_leave_dead_or_cancelled() -> None:
    assert not any(allowed(S.SUCCEEDED, target) for target in JobState)
    for state in (S.DEAD, S.CANCELLED):
        assert [t for t in JobState if allowed(state, t)] == [S.QUEUED]


def test_terminal_and_initial_states_match_the_design() -> None:
    assert {S.SUCCEEDED, S.DEAD, S.CANCELLED} == TERMINAL
    assert {S.QUEUED, S.SCHEDULED, S.WAITING} == INITIAL
    assert all(state.terminal != state.live for state in JobState)


def test_every_live_state_can_be_cancelled() -> None:
    for state in JobState:
        if state.live:
            assert allowed(state, S.CANCELLED), state
