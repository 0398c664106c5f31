"""The state machine's rules for ``ctx.transact`` (issue 24): every attempt of every job adds
1 to its job's counter through ``ctx.transact``; whatever the machine injects (lost responses
on every write, throttles, crashes between writes and right after the finish, duplicate
deliveries, zombies, re-drives), a job's counter equals the number of times a worker that ran
it committed SUCCEEDED, after every step and after the drain: never more, none lost.

What is expected is read from the jobs table, not from the store's observers: a process
killed while botocore retries a write that landed never hears of it, yet it committed. The
hook is installed by an ``initialize`` rule, so jobs that other ``initialize`` rules ran to the
end before it ran without it: they are left out. The machine's zombies write a bare finish
(they never ran the handler, so they add nothing): their successes are left out too.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from hypothesis import event
from hypothesis.stateful import initialize, invariant, rule

from leasehold.aws.dynamo import from_av
from leasehold.aws.faults import Fault, InjectedCrash
from leasehold.core.context import JobContext
from leasehold.core.states import JobState
from leasehold.lifecycle.consumer import consume
from leasehold.lifecycle.worker import Worker
from tests.integration.stateful_fired import fire

COUNTERS = "-effects"
#: The actor of the machine's bare zombie finishes (``Lifecycle.zombie_finishes``).
ZOMBIE = "zombie"


class EffectsRules:
    app: Any
    inspect: Any
    injector: Any
    url: str
    jobs: list[str]

    counters = ""

    @initialize()
    def handlers_add_one_through_transact(self) -> None:
        self.counters = self.app.settings.jobs_table + COUNTERS
        self.inspect.create_table(
            TableName=self.counters, BillingMode="PAY_PER_REQUEST",
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}])
        table = self.counters
        #: Jobs that succeeded before the hook (their handlers ran without it).
        self.before_hook = self._handler_successes()

        def add_one(app: Any, ctx: JobContext) -> None:
            # As a handler's first line would: the entry joins this attempt's finish.
            ctx.transact([{"Update": {
                "TableName": table, "Key": {"pk": {"S": ctx.job_id}},
                "UpdateExpression": "ADD n :one",
                "ExpressionAttributeValues": {":one": {"N": "1"}}}}])

        self.app.contexts.append(add_one)

    @rule()
    def a_worker_dies_right_after_its_finish(self) -> None:
        """One delivery whose process dies at its first call after its finish transaction
        (with the counter's entry) landed: the message comes back, the job is finished."""
        batch = self.app.queues.receive(self.url, max_messages=1)
        if not batch:
            return
        landed: list[bool] = []

        def finish(params: Any) -> bool:
            # Never hits (a marker): it sees the finish's response, so the write has landed.
            if any(entry.get("Update", {}).get("TableName") == self.counters
                   for entry in params.get("TransactItems", [])):
                landed.append(True)
            return False

        marker = Fault(target="dynamodb.TransactWriteItems", kind="lose", times=None,
                       when=finish)
        crash = Fault(target="*", kind="crash", when=lambda _: bool(landed))
        # Last: a lost response the weather injects on the finish hides it from the marker
        # (the caller never saw it land), so the crash never hides a landed write.
        self.injector.faults += [marker, crash]
        try:
            consume(Worker(self.app), batch)
        except InjectedCrash:
            event("a worker died right after its finish")
        except Exception:
            event("a batch failed")
        finally:
            self.injector.revive()
            self.injector.faults[:] = [f for f in self.injector.faults
                                       if f is not marker and f is not crash]

    def _handler_successes(self) -> Counter[str]:
        """Per job as the jobs table holds it: how many times a worker (not a bare zombie
        finish) committed SUCCEEDED, less the jobs done before the hook."""
        rows = self.table_items(self.app.settings.jobs_table)
        # Counted from each row's history, not its state: a workflow retry re-runs a step
        # that SUCCEEDED (SUCCEEDED -> WAITING), so a job can commit success more than once
        # and need not be SUCCEEDED now.
        # A remote worker's jobs (an external pool, stateful_remote.py) run no context.
        external = self.app.settings.external_tasks
        done = Counter({row["job_id"]: n for row in (from_av(raw) for raw in rows)
                        if row["pool"] not in external
                        and (n := sum(1 for h in row.get("history", ())
                                      if h["to"] == JobState.SUCCEEDED.value
                                      and h["by"] != ZOMBIE))})
        return done - getattr(self, "before_hook", Counter())

    def _counters(self) -> Counter[str]:
        return Counter({item["pk"]["S"]: int(item["n"]["N"])
                        for item in self.table_items(self.counters)})

    def _counted(self) -> tuple[Counter[str], Counter[str]]:
        """The counters and the successes they must equal. A row a bulk delete removed
        (``deleted``, kept by the seams mixin) can no longer say whether it succeeded: its
        counter may be 1 (it succeeded before the delete) or 0, never more, and it is left
        out of the comparison."""
        counters, expected = self._counters(), self._handler_successes()
        for job_id in getattr(self, "deleted", {}):
            assert counters.pop(job_id, 0) <= 1, job_id
            expected.pop(job_id, None)
        return counters, expected

    @invariant()
    def each_jobs_counter_counts_its_committed_successes_exactly(self) -> None:
        if self.counters:
            counters, expected = self._counted()
            assert counters == expected, (counters, expected)
            fire("each job's counter counts its committed successes (a success)",
                 sum(1 for n in expected.values() if n))

    def flow_drained(self) -> None:
        """The machine's drain ends here (every job terminal): each job that a worker ran to
        SUCCEEDED since the hook has added exactly 1, and no other job anything."""
        super().flow_drained()  # type: ignore[misc]
        if not self.counters:
            return
        counters, expected = self._counted()
        assert counters == expected, (counters, expected)
        assert set(expected) <= set(self.jobs)  # every counted job is one the machine made
