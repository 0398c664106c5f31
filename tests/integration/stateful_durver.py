"""The determinism check's invariants for the lifecycle state machine (issue 36): under the
machine's faults (lost responses, throttles, workers dying between writes, retries, sweeps),
a durable job's records keep one place each, 0..n-1 without a gap, and a deterministic
handler (the machine's ``durable`` task, from :mod:`.stateful_durable`) never stops as
``NonDeterministic``."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from hypothesis.stateful import invariant

from leasehold.core.states import JobState
from leasehold.durable.records import PREFIX
from tests.integration.stateful_fired import fire


class DurverRules:
    """Mixed into the lifecycle machine after :class:`DurableRules` (its ``_records``)."""

    latest: dict[str, Any]
    _records: Any

    @invariant()
    def durable_records_keep_their_call_order_without_gaps(self) -> None:
        if not hasattr(self, "step_runs"):
            return
        places: dict[str, list[int]] = defaultdict(list)
        for record in self._records():
            if "seq" in record:
                places[record["pk"][len(PREFIX):]].append(int(record["seq"]))
        for job_id, seqs in places.items():
            assert sorted(seqs) == list(range(len(seqs))), (job_id, seqs)
        fire("durable records keep their call order (a job with records)", len(places))

    @invariant()
    def a_deterministic_handler_never_stops_as_non_deterministic(self) -> None:
        for job in list(self.latest.values()):
            if job.state is JobState.DEAD and job.error is not None:
                assert job.error.type != "NonDeterministic", (job.job_id, job.error.message)
                fire("a deterministic handler never stops as non-deterministic (a DEAD job)")
