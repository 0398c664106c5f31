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
    # A durable job reset from a step runs again (issue 36).
    (S.SUCCEEDED, S.QUEUED),
    # A start window that passed: only before the job ever started, and final.
    (S.SCHEDULED, S.EXPIRED), (S.WAITING, S.EXPIRED), (S.QUEUED, S.EXPIRED),
    # A deadline that passed while the job waited for its lease: the sweeper ends it.
    (S.QUEUED, S.DEAD),
    # A workflow's retry puts a step downstream of a re-run one back to waiting.
    (S.DEAD, S.WAITING), (S.CANCELLED, S.WAITING), (S.SUCCEEDED, S.WAITING),
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


def test_only_manual_retries_leave_a_finished_state() -> None:
    # SUCCEEDED is left only by a workflow's retry (a step downstream of a re-run one) and
    # by a reset from a step (a durable job runs again from there).
    assert [t for t in JobState if allowed(S.SUCCEEDED, t)] == [S.WAITING, S.QUEUED]
    for state in (S.DEAD, S.CANCELLED):
        assert [t for t in JobState if allowed(state, t)] == [S.WAITING, S.QUEUED]


def test_terminal_and_initial_states_match_the_design() -> None:
    assert {S.SUCCEEDED, S.DEAD, S.CANCELLED, S.EXPIRED} == TERMINAL
    assert {S.QUEUED, S.SCHEDULED, S.WAITING} == INITIAL
    assert all(state.terminal != state.live for state in JobState)


def test_every_live_state_can_be_cancelled() -> None:
    for state in JobState:
        if state.live:
            assert allowed(state, S.CANCELLED), state
