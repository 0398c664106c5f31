"""Retention's invariant, checked after every step of the lifecycle machine (under faults):
no live row carries a TTL, and every finished job (not a workflow's step) carries one."""

from __future__ import annotations

from typing import Any

from hypothesis.stateful import invariant

from leasehold.aws.dynamo import from_av
from leasehold.core.retention import PURGE_AT
from leasehold.core.states import JobState
from leasehold.workflows.model import WorkflowState
from tests.integration.stateful_fired import fire


class RetentionRules:
    app: Any
    inspect: Any
    table_items: Any

    @invariant()
    def nothing_live_carries_a_ttl_and_every_finished_job_does(self) -> None:
        settings = self.app.settings
        for item in (from_av(raw) for raw in self.table_items(settings.jobs_table)):
            if JobState(item["state"]).live:
                assert PURGE_AT not in item, item
            elif "workflow_id" not in item and settings.retention_days:
                # A lost response on the terminal write is still one write: its TTL landed.
                assert PURGE_AT in item, item
                fire("every finished job carries its TTL (a finished job)")
        for item in (from_av(raw) for raw in self.table_items(settings.workflows_table)):
            if not WorkflowState(item["state"]).terminal or "live_shard" in item:
                assert PURGE_AT not in item, item
