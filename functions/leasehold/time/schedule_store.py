"""The schedules table: one item per schedule, every write conditional on its version.

Like the jobs table, the store keeps the sparse index key in step with the schedule: only
ACTIVE schedules with a next fire time carry ``due_shard``, so the ticker's query of the
``due`` index reads due schedules only, however many paused or finished ones are stored.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Any, Protocol

from botocore.exceptions import ClientError

from leasehold.aws.clients import Clients
from leasehold.aws.definitions import SCHEDULES
from leasehold.aws.dynamo import condition_failed, from_av, query, query_page, to_av
from leasehold.core.ids import shard_of
from leasehold.errors import Conflict, NotFound
from leasehold.settings import Settings
from leasehold.time.firing import MisfirePolicy, OverlapPolicy
from leasehold.time.schedule_model import Schedule, ScheduleState
from leasehold.time.templates import JobTemplate, WorkflowTemplate

DUE_INDEX = SCHEDULES.indexes[0]
BY_TENANT_INDEX = SCHEDULES.indexes[1]


class ScheduleStore(Protocol):
    def create(self, schedule: Schedule) -> None: ...
    def get(self, schedule_id: str) -> Schedule: ...
    def save(self, schedule: Schedule, *, expected_version: int) -> Schedule: ...
    def delete(self, schedule_id: str, *, expected_version: int) -> None: ...
    def due(self, shard: int, until: int, limit: int) -> list[str]: ...
    def by_tenant(self, tenant: str, *, limit: int, cursor: Mapping[str, Any] | None = None
                  ) -> tuple[list[Schedule], Mapping[str, Any] | None]: ...


class DynamoScheduleStore:
    def __init__(self, clients: Clients, settings: Settings | None = None) -> None:
        self.settings = settings or clients.settings
        self.table = self.settings.schedules_table
        self._clients = clients

    @property
    def _ddb(self) -> Any:
        return self._clients.dynamodb

    def _item(self, schedule: Schedule) -> dict[str, Any]:
        item = schedule_to_item(schedule)
        if schedule.state is ScheduleState.ACTIVE and schedule.next_fire_at is not None:
            item["due_shard"] = shard_of(schedule.schedule_id, self.settings.shards)
        return item

    def create(self, schedule: Schedule) -> None:
        try:
            self._ddb.put_item(TableName=self.table, Item=to_av(self._item(schedule)),
                               ConditionExpression="attribute_not_exists(schedule_id)")
        except ClientError as exc:
            if not condition_failed(exc):
                raise
            raise Conflict(f"schedule {schedule.schedule_id} exists",
                           schedule_id=schedule.schedule_id) from exc

    def get(self, schedule_id: str) -> Schedule:
        response = self._ddb.get_item(TableName=self.table,
                                      Key={"schedule_id": {"S": schedule_id}},
                                      ConsistentRead=True)
        if "Item" not in response:
            raise NotFound(f"no schedule {schedule_id}", schedule_id=schedule_id)
        return schedule_from_item(from_av(response["Item"]))

    def save(self, schedule: Schedule, *, expected_version: int) -> Schedule:
        """Replace the whole item if nobody wrote it since ``expected_version``.

        One put carries every field, so a change of cron, zone and payload is atomic: no tick
        ever sees half of it.
        """
        try:
            self._ddb.put_item(
                TableName=self.table, Item=to_av(self._item(schedule)),
                ConditionExpression="version = :v",
                ExpressionAttributeValues={":v": {"N": str(expected_version)}},
            )
        except ClientError as exc:
            if not condition_failed(exc):
                raise
            raise Conflict(f"schedule {schedule.schedule_id} changed; try again",
                           schedule_id=schedule.schedule_id) from exc
        return schedule

    def delete(self, schedule_id: str, *, expected_version: int) -> None:
        try:
            self._ddb.delete_item(
                TableName=self.table, Key={"schedule_id": {"S": schedule_id}},
                ConditionExpression="version = :v",
                ExpressionAttributeValues={":v": {"N": str(expected_version)}},
            )
        except ClientError as exc:
            if not condition_failed(exc):
                raise
            raise Conflict(f"schedule {schedule_id} changed; try again",
                           schedule_id=schedule_id) from exc

    def due(self, shard: int, until: int, limit: int) -> list[str]:
        """Ids of schedules in ``shard`` whose next fire time is at or before ``until``."""
        return [item["schedule_id"] for item in query(
            self._ddb, limit=limit, TableName=self.table, IndexName=DUE_INDEX.name,
            KeyConditionExpression="due_shard = :s AND next_fire_at <= :t",
            ExpressionAttributeValues=to_av({":s": shard, ":t": until}))]

    def by_tenant(self, tenant: str, *, limit: int, cursor: Mapping[str, Any] | None = None
                  ) -> tuple[list[Schedule], Mapping[str, Any] | None]:
        """A page of the tenant's schedules, newest first, and where the next page starts."""
        items, last = query_page(
            self._ddb, limit=limit, cursor=cursor, TableName=self.table,
            IndexName=BY_TENANT_INDEX.name, KeyConditionExpression="tenant = :t",
            ExpressionAttributeValues=to_av({":t": tenant}), ScanIndexForward=False)
        schedules = []
        for item in items:
            try:
                schedules.append(self.get(item["schedule_id"]))
            except NotFound:
                continue  # deleted between the index read and the get
        return schedules, last


# -- items ---------------------------------------------------------------------------------

_NUMBERS = ("start_at", "end_at", "max_runs", "next_fire_at", "last_fired_at",
            "last_error_at", "retry_at")


def schedule_to_item(schedule: Schedule) -> dict[str, Any]:
    item: dict[str, Any] = {
        "schedule_id": schedule.schedule_id, "tenant": schedule.tenant, "name": schedule.name,
        "cron": schedule.cron, "timezone": schedule.timezone,
        "misfire_policy": schedule.misfire_policy.value,
        "overlap_policy": schedule.overlap_policy.value,
        "starting_deadline_seconds": Decimal(str(schedule.starting_deadline_seconds)),
        "max_catch_up": schedule.max_catch_up,
        "jitter_seconds": Decimal(str(schedule.jitter_seconds)), "state": schedule.state.value,
        "run_count": schedule.run_count, "skipped_count": schedule.skipped_count,
        "created_at": schedule.created_at, "updated_at": schedule.updated_at,
        "version": schedule.version, "config_version": schedule.config_version,
    }
    # One of the two: a job template (a map) or a workflow (one JSON string, size-checked).
    if schedule.template is not None:
        item["template"] = schedule.template.to_item()
    if schedule.workflow is not None:
        item["workflow"] = schedule.workflow.to_item()
    for name in _NUMBERS:
        if getattr(schedule, name) is not None:
            item[name] = getattr(schedule, name)
    if schedule.last_job_id:
        item["last_job_id"] = schedule.last_job_id
    if schedule.failures:
        item["failures"] = schedule.failures
    if schedule.last_error is not None:
        item["last_error"] = schedule.last_error
    return item


def schedule_from_item(item: Mapping[str, Any]) -> Schedule:
    def opt(name: str) -> int | None:
        return None if item.get(name) is None else int(item[name])

    return Schedule(
        schedule_id=str(item["schedule_id"]), tenant=str(item["tenant"]),
        name=str(item.get("name", "")), cron=str(item["cron"]),
        timezone=str(item.get("timezone", "UTC")),
        template=JobTemplate.from_item(item["template"]) if "template" in item else None,
        workflow=WorkflowTemplate.from_item(item["workflow"]) if "workflow" in item else None,
        misfire_policy=MisfirePolicy(item["misfire_policy"]),
        overlap_policy=OverlapPolicy(item["overlap_policy"]),
        starting_deadline_seconds=float(item.get("starting_deadline_seconds", 300)),
        max_catch_up=int(item.get("max_catch_up", 10)), start_at=opt("start_at"),
        end_at=opt("end_at"), max_runs=opt("max_runs"),
        jitter_seconds=float(item.get("jitter_seconds", 0)),
        state=ScheduleState(item["state"]), next_fire_at=opt("next_fire_at"),
        run_count=int(item.get("run_count", 0)),
        skipped_count=int(item.get("skipped_count", 0)), last_fired_at=opt("last_fired_at"),
        last_job_id=item.get("last_job_id"), created_at=int(item.get("created_at", 0)),
        updated_at=int(item.get("updated_at", 0)), version=int(item.get("version", 1)),
        config_version=int(item.get("config_version", 1)),
        failures=int(item.get("failures", 0)), last_error=item.get("last_error"),
        last_error_at=opt("last_error_at"), retry_at=opt("retry_at"),
    )


