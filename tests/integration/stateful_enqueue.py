"""Transactional enqueue's rules for the lifecycle machine (issue 24): business transactions
that carry ``enqueue_item``'s entries commit or are cancelled (by their own condition, or by
the tenant's cap), under the machine's lost responses and throttles; the relay hands off
their rows from the images a stream would carry (the machine's DynamoDB has no stream), in
any order, more than once, or not at all (then the sweeper repairs the hand-off).

After every step: a job exists for exactly the orders whose transaction committed, and none
for a cancelled one."""

from __future__ import annotations

import itertools
from typing import Any

from hypothesis import event
from hypothesis import strategies as st
from hypothesis.stateful import initialize, invariant, precondition, rule

from leasehold.aws.definitions import job_key
from leasehold.aws.dynamo import from_av
from leasehold.core.jobs import job_from_item
from leasehold.errors import LeaseholdError
from leasehold.streams.enqueue import enqueue_item, hand_off
from tests.integration.stateful_fired import fire

ORDERS = "-orders"


class EnqueueRules:
    """Mixed into the lifecycle machine (``tests/integration/test_stateful.py``)."""

    app: Any
    inspect: Any
    jobs: list[str]
    _observe: Any
    limits: Any
    tenants: tuple[str, ...]
    failed: tuple[type[BaseException], ...]

    @initialize()
    def an_orders_table(self) -> None:
        self.orders = self.app.settings.jobs_table + ORDERS
        self.inspect.create_table(
            TableName=self.orders, BillingMode="PAY_PER_REQUEST",
            KeySchema=[{"AttributeName": "order", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "order", "AttributeType": "S"}])
        self.order_ids = itertools.count()
        #: Every row image an enqueue wrote (what its INSERT record carries), by job id.
        self.enqueued: dict[str, dict[str, Any]] = {}
        # One order its business condition refuses, in every example: no job, and (the
        # per-step span check, stateful_phantoms.py) no submit span for the job it named.
        self.place_an_order(True, "acme")

    @rule(taken=st.booleans(), tenant=st.sampled_from(("acme", "zeta")))
    def place_an_order(self, taken: bool, tenant: str) -> None:
        order = f"o{next(self.order_ids)}"
        if taken:  # the business condition will refuse the whole transaction
            self.inspect.put_item(TableName=self.orders, Item={"order": {"S": order}})
        entries = enqueue_item(self.app, "work", {"fail_first": 0}, tenant=tenant,
                               limits=self.limits)
        job_id = entries[0]["Put"]["Item"]["job_id"]["S"]
        try:
            self.app.clients.dynamodb.transact_write_items(TransactItems=[
                {"Put": {"TableName": self.orders,
                         "Item": {"order": {"S": order}, "job": {"S": job_id}},
                         "ConditionExpression": "attribute_not_exists(#o)",
                         "ExpressionAttributeNames": {"#o": "order"}}},
                *entries])
        except self.failed:
            event("an order's transaction was refused or its answer lost")
        stored = self.inspect.get_item(TableName=self.app.settings.jobs_table,
                                       Key=job_key(job_id),
                                       ConsistentRead=True).get("Item")
        if stored is not None:  # committed (perhaps with its answer lost)
            self.jobs.append(job_id)
            self._observe(job_from_item(from_av(stored)), None)
            self.enqueued[job_id] = entries[0]["Put"]["Item"]

    @precondition(lambda self: getattr(self, "enqueued", None))
    @rule(data=st.data())
    def relay_hands_off(self, data: st.DataObject) -> None:
        ids = data.draw(st.lists(st.sampled_from(sorted(self.enqueued)), min_size=1,
                                 max_size=4))
        records = [{"eventName": "INSERT", "dynamodb": {"NewImage": self.enqueued[i]}}
                   for i in ids]
        try:
            hand_off(self.app, records)
        except (*self.failed, LeaseholdError):
            event("a hand-off failed: the relay reads the batch again")

    @invariant()
    def a_job_exists_for_exactly_the_committed_orders(self) -> None:
        if not getattr(self, "orders", None):
            return
        orders = self.table_items(self.orders)
        committed = {item["job"]["S"] for item in orders if "job" in item}
        made = {raw["job_id"]["S"] for raw in self.table_items(self.app.settings.jobs_table)
                if raw.get("handoff", {}).get("S") == "stream"}
        assert made == committed, (made, committed)
        fire("a job exists for exactly the committed orders (an order)", len(committed))
