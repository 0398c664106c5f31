"""The order of a durable job's records, and the rule a replay keeps (issue 36).

Every record (a step, a sleep, a callback, a spawn, a patch marker) carries ``seq``: the place
of the durable call that wrote it among the execution's durable calls, 0 first. A replay
makes the same calls from the top, so its n-th call must find the history's n-th record, of
the same kind under the same name (its sort key, ``<kind>#<name>``):

- the n-th call finds the n-th record: it is answered from it (a replay);
- the n-th call finds a record of another kind or name there (a step renamed, reordered or
  removed, a sleep moved): the attempt stops with :class:`NonDeterministic` before anything
  is returned or written, naming the expected and the found call;
- the n-th call is past the history's end: new work, recorded at place n (a step added at the
  end, or the rest of a job that had not got that far);
- the handler returns while records remain unread (its last step removed): the attempt stops
  with :class:`NonDeterministic` too, as a success would drop recorded work silently.

``ctx.patched("id")`` branches old and new code: at place n it is True if the history has the
marker ``patch#id`` there (and the marker is read, as any record), or if the history ends
before n (a marker is written: the branch is taken for good); False if the history holds
another record at n (the history was written by code without the patch, which went on past
this point): it takes no place then, so the old branch's call meets its own record.

Records written before issue 36 have no ``seq``: they are answered by name alone, as then.
``ctx.once`` (the streams feature's per-name result) and ``ctx.wait_for`` write no record and
are not checked.

Pure: :class:`History` holds a job's records as read; the runner (and the replayer,
:mod:`.replay`) ask it for each call's record.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from leasehold.core.suspension import NonDeterministic

SEQ = "seq"
PATCH = "patch#"


def describe(sk: str) -> str:
    """``step#charge`` -> ``step 'charge'``."""
    kind, _, name = sk.partition("#")
    kind = {"cb": "callback", "child": "spawn", "sleep": "sleep"}.get(kind, kind)
    return f"{kind} #{name}" if kind == "sleep" else f"{kind} {name!r}"


class History:
    def __init__(self, job_id: str, stored: Mapping[str, Mapping[str, Any]]) -> None:
        self.job_id = job_id
        #: place -> sort key, for the records that have a place.
        self.order: dict[int, str] = {}
        for sk, record in stored.items():
            if record.get(SEQ) is not None:
                self.order[int(record[SEQ])] = sk
        #: The place of the next durable call.
        self.position = 0
        #: The mismatch met, raised again by every later call and at the return: a handler
        #: that catches it (``except Exception:``) cannot go on as if it had not happened.
        self.broken: NonDeterministic | None = None

    @property
    def length(self) -> int:
        return max(self.order, default=-1) + 1

    def at(self) -> str | None:
        """The sort key of the record at the next call's place (None: past the end)."""
        return self.order.get(self.position)

    def take(self, sk: str, legacy: bool = False) -> int:
        """The place of the call whose record is ``sk``, checked against the history and
        taken; raises :class:`NonDeterministic` on a mismatch. ``legacy``: ``sk`` is stored
        without a place (before issue 36), answered by name as then. (A record past the
        history's end cannot be met: every earlier place was matched, so every placed
        record was met at its place.)"""
        if self.broken is not None:
            raise self.broken
        expected = self.at()
        if not legacy and expected is not None and expected != sk:
            self.broken = NonDeterministic(
                f"job {self.job_id} is not deterministic: its history has "
                f"{describe(expected)} at durable call {self.position + 1}, and the code "
                f"called {describe(sk)} there. Deploy code that makes the recorded calls "
                "(branch new code with ctx.patched) and retry the job",
                job_id=self.job_id, expected=describe(expected), found=describe(sk),
                position=self.position + 1)
            raise self.broken
        place = self.position
        self.position += 1
        if expected is None:
            self.order[place] = sk  # recorded now, at this place
        return place

    def patched(self, sk: str) -> bool | None:
        """What ``ctx.patched`` answers at the next place: True (the marker is there: taken),
        False (another record is: the history predates the patch; nothing taken), or None
        (past the end: the caller records the marker)."""
        if self.broken is not None:
            raise self.broken
        expected = self.at()
        if expected is None:
            return None
        if expected == sk:
            self.position += 1
            return True
        return False

    def deprecated(self, sk: str) -> None:
        """``ctx.deprecate_patch``: the marker is read if it is at the next place."""
        if self.at() == sk:
            self.position += 1

    def finished(self) -> None:
        """The handler returned: every record must have been read."""
        if self.broken is not None:
            raise self.broken
        left = [self.order[p] for p in sorted(self.order) if p >= self.position]
        if left:
            raise NonDeterministic(
                f"job {self.job_id} is not deterministic: its history has "
                f"{describe(left[0])} at durable call {self.position + 1}, and the code "
                "returned before calling it. Deploy code that makes the recorded calls "
                "(branch new code with ctx.patched) and retry the job",
                job_id=self.job_id, expected=describe(left[0]), found="the handler's return",
                position=self.position + 1)
