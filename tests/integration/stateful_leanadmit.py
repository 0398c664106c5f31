"""The state machine's rules and invariants for a tenant whose cap comes and goes (issue 32).

Mixed into ``tests/integration/test_stateful.py``'s machines. The tenant ``lean`` is
admitted without a cap (no slot: its rows are uncounted) until a rule sets the cap, which
counts its live jobs in (``count_in_live_jobs``, perhaps killed part-way, under the
machine's weather of lost responses and throttles); another lifts it again. After every
step:

* the tenant's counters are never fewer than its live counted rows (across cap set and
  unset while jobs are live and workers finish jobs they read before; issue 46: a slot is
  taken before its row and given back after its end, so a crash or a failed write between
  them leaves one counted with no job), and equal to them after a repair that runs once
  every bucket has closed, with no crash in flight (:meth:`repair_the_lean_slots`);
* no admission item holds more than its share of the cap plus what a count-in put on it
  over its share, and that excess never grows;
* once a count-in has run to its end under a cap still set, every live job is counted.
"""

from __future__ import annotations

import itertools
from typing import Any

from hypothesis import event
from hypothesis import strategies as st
from hypothesis.stateful import invariant, precondition, rule

from leasehold.aws.definitions import job_key
from leasehold.aws.dynamo import from_av
from leasehold.aws.faults import Fault, InjectedCrash
from leasehold.core.jobs import job_from_item
from leasehold.core.spec import JobSpec
from leasehold.errors import RateLimited
from leasehold.lifecycle.submission import COUNTED
from leasehold.tenancy import slots
from leasehold.tenancy.admission import Limits, submit_admitted
from leasehold.tenancy.backfill import count_in_live_jobs
from leasehold.tenancy.counters import slot_item
from leasehold.tenancy.slots import BUCKET_MS, SETTLE_MS
from tests.integration.stateful_fired import fire

LEAN = "lean"
_KEYS = itertools.count()


def _uncapped(limits: Limits) -> Limits:
    return Limits(rate=limits.rate, burst=limits.burst, max_live=None)


class LeanAdmissionRules:
    """Uses the machine's ``app``, ``injector``, ``inspect``, ``latest``, ``jobs``,
    ``limits`` and ``failed``."""

    lean_capped = False
    #: A count-in ran to its end since the cap was last set.
    lean_counted_in = False
    #: (tenant item) -> live jobs a count-in put on it over its share, as it shrinks.
    lean_excess: dict[int, int]

    def _lean_limits(self: Any) -> Limits:
        return self.limits if self.lean_capped else _uncapped(self.limits)

    @rule(fail_first=st.integers(0, 2))
    def submit_to_the_lean_tenant(self: Any, fail_first: int) -> None:
        """An API submission of ``lean``: a slot under the cap if it has one, none if not."""
        spec = JobSpec(task="work", payload={"fail_first": fail_first}, tenant=LEAN,
                       idempotency_key=f"lean{next(_KEYS)}")
        for _ in range(3):
            try:
                job = submit_admitted(self.app, spec, "default", self._lean_limits()).job
                break
            except RateLimited:
                event("lean: refused at its cap")
                return
            except self.failed:
                event("lean: a submission failed; the caller retries with its key")
        else:
            return
        if job.job_id not in self.jobs:
            self.jobs.append(job.job_id)

    @rule(crash_at=st.sampled_from([None, None, 1, 2, 3]))
    def set_the_lean_cap_and_count_live_jobs_in(self: Any, crash_at: int | None) -> None:
        """The cap is set, then live jobs are counted in; the process may die before its
        ``crash_at``-th transaction (a second run, later, finishes the job)."""
        self.lean_capped = True
        self._lean_count_in(crash_at)

    @precondition(lambda self: self.lean_capped and not self.lean_counted_in)
    @rule()
    def count_the_lean_jobs_in_again(self: Any) -> None:
        self._lean_count_in(None)

    @precondition(lambda self: self.lean_capped)
    @rule()
    def lift_the_lean_cap(self: Any) -> None:
        self.lean_capped = self.lean_counted_in = False

    def _lean_count_in(self: Any, crash_at: int | None) -> None:
        calls = itertools.count(1)
        crash = Fault(target="dynamodb.TransactWriteItems", kind="crash",
                      when=lambda _: next(calls) == crash_at)
        if crash_at is not None:
            self.injector.faults.append(crash)
        try:
            count_in_live_jobs(self.app, self.limits)
            self.lean_counted_in = True
            event("lean: counted in")
        except InjectedCrash:
            event("lean: the count-in was killed part-way")
        except self.failed:
            event("lean: the count-in failed part-way")
        finally:
            self.injector.revive()
            self.injector.faults[:] = [f for f in self.injector.faults if f is not crash]
            self._lean_reread()
        shards = self.limits.shard_count()
        excess = getattr(self, "lean_excess", {})
        for shard, live in self._lean_items().items():
            over = live - self.limits.per_shard(shards, shard).max_live
            excess[shard] = max(excess.get(shard, 0), over, 0)
        self.lean_excess = excess

    def _lean_reread(self: Any) -> None:
        """The count-in writes ``counted`` outside any transition (no observer hears it), on
        rows admitted without a slot (``counted`` false), whichever tenant's."""
        for job_id, job in list(self.latest.items()):
            if job.extra.get(COUNTED) is False:
                item = self.inspect.get_item(TableName=self.app.settings.jobs_table,
                                             Key=job_key(job_id),
                                             ConsistentRead=True).get("Item")
                if item:
                    self.latest[job_id] = job_from_item(from_av(item))

    def _lean_items(self: Any) -> dict[int, int]:
        live = {}
        for shard in range(self.limits.shard_count()):
            item = self.table_item(self.app.settings.tenants_table, "tenant",
                                   slot_item(LEAN, shard))
            live[shard] = int(item.get("live", {"N": "0"})["N"])
        return live

    def _lean_live_jobs(self: Any) -> list[Any]:
        return [job for job in self.latest.values() if job.tenant == LEAN and job.state.live]

    @rule()
    def repair_the_lean_slots(self: Any) -> None:
        """Past every bucket's close (60 s), the repair, in clear weather, returns every
        orphaned slot: the counters equal the live counted rows again."""
        self.clock.advance(BUCKET_MS / 1000 + SETTLE_MS / 1000)
        weather, self.injector.faults[:] = list(self.injector.faults), []
        try:
            returned = slots.repair(self.app, self.app.now())
        finally:
            self.injector.faults[:] = weather
        if returned:
            event("lean: the repair returned orphaned slots")
        counted = sum(1 for job in self._lean_live_jobs() if job.extra.get(COUNTED))
        assert sum(self._lean_items().values()) == counted, (self._lean_items(), counted)
        fire("the lean tenant counts its live counted jobs (one counted)", counted)

    @invariant()
    def the_lean_tenant_counts_at_least_its_live_counted_jobs(self: Any) -> None:
        counted = sum(1 for job in self._lean_live_jobs() if job.extra.get(COUNTED))
        assert sum(self._lean_items().values()) >= counted, (self._lean_items(), counted)
        fire("the lean tenant counts its live counted jobs (one counted)", counted)

    @invariant()
    def a_lean_item_never_passes_its_share_but_by_what_a_count_in_put_over_it(
            self: Any) -> None:
        shards = self.limits.shard_count()
        excess = getattr(self, "lean_excess", {})
        for shard, live in self._lean_items().items():
            share = self.limits.per_shard(shards, shard).max_live
            allowed = share + excess.get(shard, 0)
            assert live <= allowed, (shard, live, share, excess)
            excess[shard] = max(0, min(excess.get(shard, 0), live - share))  # only shrinks
        self.lean_excess = excess

    @invariant()
    def once_counted_in_under_a_cap_every_live_lean_job_is_counted(self: Any) -> None:
        if self.lean_capped and self.lean_counted_in:
            uncounted = [job.job_id for job in self._lean_live_jobs()
                         if not job.extra.get(COUNTED)]
            assert not uncounted, uncounted
