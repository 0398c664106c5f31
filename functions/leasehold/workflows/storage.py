"""Workflow storage: the workflows table, and the dependency counter on step rows.

Every write is one conditional UpdateItem or PutItem, so a retried or duplicated call is
either a no-op or visibly refused:

* a step's outcome is recorded on the workflow once: ``SET finished.#step = :outcome,
  steps_left = steps_left - 1`` on the condition ``attribute_not_exists(finished.#step)``;
* a dependency is counted on a dependent once: ``SET inputs.#dep = :entry, deps_pending =
  deps_pending - 1`` on the condition ``#state = WAITING AND attribute_not_exists(inputs.#dep)``
  (the dependency's input entry is the record that it was counted).

Only unsettled workflows (not terminal, or terminal with steps possibly still live) carry
``live_shard``: the reconciler reads that sparse index, so its cost grows with the number of
live workflows, never with the number stored.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from botocore.exceptions import ClientError

from leasehold.aws.clients import Clients
from leasehold.aws.definitions import job_key
from leasehold.aws.dynamo import batch_get, condition_failed, from_av, query, query_page, to_av
from leasehold.core.ids import shard_of
from leasehold.core.states import JobState
from leasehold.errors import NotFound
from leasehold.settings import Settings
from leasehold.workflows.inputs import ATTRIBUTE as INPUTS
from leasehold.workflows.model import Workflow, WorkflowState, workflow_from_item

LIVE_INDEX = "live"
BY_TENANT_INDEX = "by_tenant"


class WorkflowStore(Protocol):
    def create(self, item: Mapping[str, Any]) -> tuple[Workflow, bool]: ...
    def get(self, workflow_id: str) -> Workflow: ...
    def batch_get(self, workflow_ids: Sequence[str]) -> list[Workflow]: ...
    def update(self, workflow_id: str, *, sets: Mapping[str, Any] | None = None,
               removes: Sequence[str] = (), states: Sequence[WorkflowState] = (),
               record: tuple[str, str] | None = None) -> tuple[Workflow | None, bool]: ...
    def record_step(self, workflow_id: str, step: str, outcome: str, *, check_at: int
                    ) -> tuple[int | None, Workflow | None]: ...
    def live(self, shard: int, until: int, limit: int) -> list[str]: ...
    def by_tenant(self, tenant: str, *, limit: int, cursor: Mapping[str, Any] | None = None
                  ) -> tuple[list[str], Mapping[str, Any] | None]: ...
    def count_dependency(self, job_id: str, dependency: str, entry: str) -> int | None: ...


class DynamoWorkflowStore:
    def __init__(self, clients: Clients, settings: Settings | None = None) -> None:
        self.settings = settings or clients.settings
        self.table = self.settings.workflows_table
        self._clients = clients

    @property
    def _ddb(self) -> Any:
        return self._clients.dynamodb

    def live_keys(self, workflow_id: str, check_at: int) -> dict[str, Any]:
        return {"live_shard": shard_of(workflow_id, self.settings.shards), "check_at": check_at}

    def create(self, item: Mapping[str, Any]) -> tuple[Workflow, bool]:
        """Put a new workflow; if its id exists, the stored one and ``False``."""
        try:
            self._ddb.put_item(TableName=self.table, Item=to_av(item),
                               ConditionExpression="attribute_not_exists(workflow_id)")
        except ClientError as exc:
            if not condition_failed(exc):
                raise
            return self.get(item["workflow_id"]), False
        return workflow_from_item(item), True

    def get(self, workflow_id: str) -> Workflow:
        response = self._ddb.get_item(TableName=self.table, ConsistentRead=True,
                                      Key={"workflow_id": {"S": workflow_id}})
        if "Item" not in response:
            raise NotFound(f"no workflow {workflow_id}", workflow_id=workflow_id)
        return workflow_from_item(from_av(response["Item"]))

    def batch_get(self, workflow_ids: Sequence[str]) -> list[Workflow]:
        return [workflow_from_item(item)
                for item in batch_get(self._ddb, self.table, "workflow_id", workflow_ids)]


    def update(self, workflow_id: str, *, sets: Mapping[str, Any] | None = None,
               removes: Sequence[str] = (), states: Sequence[WorkflowState] = (),
               record: tuple[str, str] | None = None) -> tuple[Workflow | None, bool]:
        """One conditional update: ``(workflow as it is now, whether this call changed it)``.

        ``states``: the workflow must be in one of these. ``record=(step, outcome)`` also
        records that step's outcome, on the condition that it is not recorded yet.
        """
        item, changed = self._write(workflow_id, sets or {}, removes, states, record,
                                    "ALL_NEW")
        return (workflow_from_item(item) if item else None), changed

    def record_step(self, workflow_id: str, step: str, outcome: str, *, check_at: int
                    ) -> tuple[int | None, Workflow | None]:
        """Record a step's outcome on a RUNNING workflow, once.

        Returns ``(steps left, None)`` when this call recorded it, else ``(None, the workflow
        as it is)`` (None if missing): the step was recorded before, or the workflow is not
        RUNNING. Only the counter comes back on success, not the whole (large) item.
        """
        item, changed = self._write(workflow_id, {"check_at": check_at}, (),
                                    [WorkflowState.RUNNING], (step, outcome), "UPDATED_NEW")
        if changed:
            return int((item or {})["steps_left"]), None
        return None, (workflow_from_item(item) if item else None)

    def _write(self, workflow_id: str, sets: Mapping[str, Any], removes: Sequence[str],
               states: Sequence[WorkflowState], record: tuple[str, str] | None,
               returns: str) -> tuple[dict[str, Any] | None, bool]:
        names: dict[str, str] = {"#state": "state"}
        values: dict[str, Any] = {}
        condition = ["attribute_exists(workflow_id)"]
        if states:
            keys = []
            for i, state in enumerate(states):
                values[f":st{i}"] = state.value
                keys.append(f":st{i}")
            condition.append(f"#state IN ({', '.join(keys)})")
        set_parts = []
        for i, (name, value) in enumerate(sets.items()):
            names[f"#s{i}"] = name
            values[f":s{i}"] = value
            set_parts.append(f"#s{i} = :s{i}")
        if record is not None:
            # The outcome map entry is the guard: a step reported twice is counted once.
            names.update({"#finished": "finished", "#step": record[0]})
            values.update({":outcome": record[1], ":one": 1})
            condition.append("attribute_not_exists(#finished.#step)")
            set_parts += ["#finished.#step = :outcome", "steps_left = steps_left - :one"]
        clauses = ["SET " + ", ".join(set_parts)] if set_parts else []
        if removes:
            for i, name in enumerate(removes):
                names[f"#r{i}"] = name
            clauses.append("REMOVE " + ", ".join(f"#r{i}" for i in range(len(removes))))
        try:
            response = self._ddb.update_item(
                TableName=self.table, Key={"workflow_id": {"S": workflow_id}},
                UpdateExpression=" ".join(clauses), ConditionExpression=" AND ".join(condition),
                ExpressionAttributeNames=names, ExpressionAttributeValues=to_av(values),
                ReturnValues=returns, ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as exc:
            if not condition_failed(exc):
                raise
            old: Any = exc.response.get("Item")
            return (from_av(old) if old else None), False
        return from_av(response["Attributes"]), True

    def live(self, shard: int, until: int, limit: int) -> list[str]:
        """Unsettled workflows of one shard whose next check is due by ``until``."""
        return [item["workflow_id"] for item in query(
            self._ddb, limit=limit, TableName=self.table, IndexName=LIVE_INDEX,
            KeyConditionExpression="live_shard = :s AND check_at <= :t",
            ExpressionAttributeValues=to_av({":s": shard, ":t": until}))]

    def by_tenant(self, tenant: str, *, limit: int, cursor: Mapping[str, Any] | None = None
                  ) -> tuple[list[str], Mapping[str, Any] | None]:
        items, last = query_page(
            self._ddb, limit=limit, cursor=cursor, TableName=self.table,
            IndexName=BY_TENANT_INDEX, KeyConditionExpression="tenant = :t",
            ExpressionAttributeValues=to_av({":t": tenant}), ScanIndexForward=False)
        return [item["workflow_id"] for item in items], last

    # -- the dependency counter on a step's row (jobs table) ---------------------------


    # -- the dependency counter on a step's row (jobs table) ---------------------------

    def count_dependency(self, job_id: str, dependency: str, entry: str) -> int | None:
        """Count ``dependency`` as finished on the WAITING step ``job_id``, once.

        Returns the dependencies still pending after this call counted it, or None when it
        did not: the dependency was counted before (a duplicate delivery, a sweeper re-drive,
        the reconciler), or the row is not WAITING (released, cancelled) or missing. The
        dependency's input entry is the guard, written in the same update as the decrement.
        """
        try:
            response = self._ddb.update_item(
                TableName=self.settings.jobs_table, Key=job_key(job_id),
                UpdateExpression="SET deps_pending = deps_pending - :one, #inputs.#dep = :entry",
                ConditionExpression="#state = :waiting AND attribute_not_exists(#inputs.#dep)",
                ExpressionAttributeNames={"#state": "state", "#inputs": INPUTS,
                                          "#dep": dependency},
                ExpressionAttributeValues=to_av({
                    ":one": 1, ":entry": entry, ":waiting": JobState.WAITING.value}),
                # Only the counter comes back: the row of a wide fan-in is large.
                ReturnValues="UPDATED_NEW",
            )
        except ClientError as exc:
            if not condition_failed(exc):
                raise
            return None
        return int(from_av(response["Attributes"])["deps_pending"])


