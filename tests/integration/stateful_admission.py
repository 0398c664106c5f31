"""The state machine's rules and invariants for admission under contention (issue 21).

Mixed into ``tests/integration/test_stateful.py``'s machines. Admissions meet injected
``TransactionConflict`` s (what concurrent transactions on one item get on AWS); a 429 may
only come from the cap (the machine's rate is never used up), contention is a 503 or a
hand-over to another item, and after every step each admission item holds at most its share
of the cap and its GCRA state is never overdrawn.
"""

from __future__ import annotations

import itertools
from decimal import Decimal
from typing import Any

from hypothesis import event
from hypothesis import strategies as st
from hypothesis.stateful import invariant, rule

from leasehold.aws.faults import Fault
from leasehold.core.spec import JobSpec
from leasehold.errors import Overloaded, RateLimited
from leasehold.tenancy.admission import TAT, Gcra, submit_admitted
from leasehold.tenancy.counters import slot_item
from tests.integration.stateful_fired import fire

_KEYS = itertools.count()


def _machine() -> Any:
    from tests.integration import test_stateful  # the machine imports this module
    return test_stateful


class AdmissionContention:
    """Uses the machine's ``app``, ``injector``, ``latest`` and ``jobs``."""

    @rule(tenant=st.sampled_from(("acme", "zeta")), conflicts=st.sampled_from([1, 3, 8, 9]))
    def admit_through_conflicting_transactions(self: Any, tenant: str, conflicts: int) -> None:
        """The next ``conflicts`` transactions meet another one on an item (8 or more
        outlast ``transact_write``'s tries on one item)."""
        limits = _machine().LIMITS
        # A submission's slot is its own update (issue 46): an item held by another's
        # transaction (a retry's, a count-in's) refuses it as it refused a transaction.
        tenants = self.app.settings.tenants_table
        self.injector.faults.append(Fault(
            target="dynamodb.TransactWriteItems|dynamodb.UpdateItem", kind="conflict",
            times=conflicts, when=lambda params: "TransactItems" in params
            or params.get("TableName") == tenants))
        spec = JobSpec(task="work", payload={"fail_first": 0}, tenant=tenant,
                       idempotency_key=f"conflict{next(_KEYS)}")
        try:
            job = submit_admitted(self.app, spec, "default", limits).job
        except Overloaded:
            event("admission contended on every item tried: 503")
            return
        except RateLimited as refused:
            slots = sum(int(self.table_item(tenants, "tenant", slot_item(tenant, shard))
                            .get("live", {"N": "0"})["N"])
                        for shard in range(limits.shard_count()))
            assert "live jobs" in str(refused) and "rate" not in str(refused), str(refused)
            # Only a real cap says no: its slots are all held (by live jobs, or, until the
            # repair, by orphans a crash left: issue 46).
            assert slots == limits.max_live, (slots, str(refused))
            event("admission under conflicts refused at the cap")
            return
        except _machine().FAILED:
            event("admission under conflicts failed (another fault)")
            return
        finally:
            self.injector.faults[:] = [f for f in self.injector.faults if f.kind != "conflict"]
        if job.job_id not in self.jobs:
            self.jobs.append(job.job_id)
        event("admitted through conflicts")

    @invariant()
    def every_admission_item_keeps_its_share_of_the_cap_and_its_rate(self: Any) -> None:
        limits = _machine().LIMITS
        shards = limits.shard_count()
        now = self.app.now()
        for tenant in _machine().TENANTS:
            for shard in range(shards):
                share = limits.per_shard(shards, shard)
                gcra = Gcra.of(share)
                item = self.table_item(self.app.settings.tenants_table, "tenant",
                                       slot_item(tenant, shard))
                assert int(item.get("live", {"N": "0"})["N"]) <= share.max_live, item
                fire("every admission item keeps its share (an item in use)",
                     int(item.get("live", {"N": "0"})["N"]) > 0)
                if TAT in item:  # admitted only while tat <= now + tau: never past + T
                    assert Decimal(item[TAT]["N"]) <= now + gcra.tolerance + gcra.interval
