"""The state machine's rules for ``ctx.transact`` (issue 24): every attempt of every job adds
1 to its job's counter through ``ctx.transact``; whatever the machine injects (lost responses
on every write, throttles, crashes between writes, duplicate deliveries, zombies, re-drives),
a job's counter equals the number of times it committed SUCCEEDED, and a job never finished
has none."""

from __future__ import annotations

from typing import Any

from hypothesis.stateful import initialize, invariant

from leasehold.core.context import JobContext

COUNTERS = "-effects"


class EffectsRules:
    app: Any
    inspect: Any
    succeeded: Any
    latest: Any

    counters = ""
    before_effects: dict[str, int]

    @initialize()
    def handlers_add_one_through_transact(self) -> None:
        self.counters = self.app.settings.jobs_table + COUNTERS
        self.inspect.create_table(
            TableName=self.counters, BillingMode="PAY_PER_REQUEST",
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}])
        table = self.counters

        def add_one(app: Any, ctx: JobContext) -> None:
            # As a handler's first line would: the entry joins this attempt's finish.
            ctx.transact([{"Update": {
                "TableName": table, "Key": {"pk": {"S": ctx.job_id}},
                "UpdateExpression": "ADD n :one",
                "ExpressionAttributeValues": {":one": {"N": "1"}}}}])

        self.app.contexts.append(add_one)
        # Initialize rules run in any order: what succeeded before the hook added nothing.
        self.before_effects = dict(self.succeeded)

    @invariant()
    def each_jobs_counter_counts_its_committed_successes_exactly(self) -> None:
        if not self.counters:
            return
        items = self.inspect.scan(TableName=self.counters, ConsistentRead=True)["Items"]
        counters = {item["pk"]["S"]: int(item["n"]["N"]) for item in items}
        expected = {job_id: self.succeeded[job_id] - self.before_effects.get(job_id, 0)
                    for job_id in self.latest}
        for job_id, count in expected.items():
            assert counters.get(job_id, 0) == count, (job_id, counters)
        assert sum(counters.values()) == sum(expected.values())
