"""The jobs table's sparse indexes: the keys a row carries in each state, and the queries
of the sweeper, the ticker and the tenant listing (see :mod:`leasehold.lifecycle.store`)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from botocore.exceptions import ClientError

from leasehold.aws.definitions import BY_TENANT_INDEX, DUE_INDEX, SWEEP_INDEX, job_key
from leasehold.aws.dynamo import condition_failed, from_av, old_item, query, query_page, to_av
from leasehold.core.flowcontrol import START_BY
from leasehold.core.ids import home, listed_at_home, shard_of, time_prefix
from leasehold.core.jobs import Job, job_from_item
from leasehold.core.states import JobState
from leasehold.lifecycle.store_base import DEADLINE, StoreBase
from leasehold.settings import Settings


def tenant_shard(tenant: str, shard: int) -> str:
    """The ``by_tenant_shard`` index key of a tenant's ``shard``."""
    return f"{tenant}#{shard}"


class IndexQueries(StoreBase):
    """The index keys and queries of the jobs table."""

    def sweep_entries(self, shard: int, after: int, before: int, page: int = 500
                      ) -> Iterator[tuple[int, str]]:
        """The shard's ``sweep`` entries with ``after <= sweep_at < before``, as
        (sweep_at, job_id) in ``sweep_at`` order, read lazily ``page`` at a time: the live
        rows among them are a superset of the shard's expired leases and lost hand-offs
        (the caller reads the rows to tell them); the others are rows that finished since."""
        for item in query(self._ddb, TableName=self.table, IndexName=SWEEP_INDEX.name,
                          KeyConditionExpression="sweep_shard = :s AND sweep_at BETWEEN :a AND :b",
                          ExpressionAttributeValues=to_av(
                              {":s": shard, ":a": after, ":b": before - 1}),
                          Limit=page):
            yield int(item["sweep_at"]), str(item["job_id"])

    def move_sweep(self, job: Job, to: int) -> bool:
        """Move a live job's ``sweep_at`` forward to ``to``; False if the row changed.

        Conditioned on the (state, epoch) the caller read, on the deadline still being at
        least ``to`` (so the move can never put ``sweep_at`` past the time the row needs the
        sweeper), and on ``sweep_at`` not being past ``to`` already (an entry only moves
        forward, so two sweepers at once never move one back below a frontier). Nothing else
        changes, so a retried write whose first try landed simply succeeds again; a row
        another sweeper moved further is moved (True).
        """
        try:
            self._ddb.update_item(
                TableName=self.table, Key=job_key(job.job_id),
                UpdateExpression="SET sweep_at = :to",
                ConditionExpression=("#state = :state AND epoch = :epoch AND "
                                     "lease_expires_at >= :to AND sweep_at <= :to"),
                ExpressionAttributeNames={"#state": "state"},
                ExpressionAttributeValues=to_av({
                    ":to": to, ":state": job.state.value, ":epoch": job.epoch}),
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as exc:
            if not condition_failed(exc):
                raise
            old = from_av(old_item(exc) or {})
            return old.get("state") == job.state.value and old.get("epoch") == job.epoch \
                and int(old.get("sweep_at", -1)) >= to
        return True

    def due(self, shard: int, until: int, limit: int) -> list[str]:
        return [item["job_id"] for item in self._query(
            DUE_INDEX.name, "due_shard = :s AND run_at <= :t", {":s": shard, ":t": until}, limit)]

    def by_tenant(self, tenant: str, shard: int, *, limit: int,
                  cursor: Mapping[str, Any] | None = None, newest_first: bool = True,
                  bound: int | None = None
                  ) -> tuple[list[tuple[int, str]], Mapping[str, Any] | None]:
        """One page of one shard of a tenant's jobs: (created_at, job_id) in created_at order,
        from ``bound`` on (inclusive; older if ``newest_first``), and where the next resumes."""
        condition = "tenant_shard = :t"
        values: dict[str, Any] = {":t": tenant_shard(tenant, shard)}
        if bound is not None:
            condition += f" AND created_at {'<=' if newest_first else '>='} :b"
            values[":b"] = bound
        items, last = query_page(
            self._ddb, limit=limit, cursor=cursor, TableName=self.table,
            IndexName=BY_TENANT_INDEX.name, KeyConditionExpression=condition,
            ExpressionAttributeValues=to_av(values), ScanIndexForward=not newest_first)
        shards = self.settings.tenant_shards
        # A row its home lists (:meth:`at_home`) is read from there only, never twice.
        return [(int(item["created_at"]), item["job_id"]) for item in items
                if not listed_at_home(item["job_id"], tenant, int(item["created_at"]),
                                      shards)], last

    def at_home(self, tenant: str, shard: int, *, limit: int,
                cursor: Mapping[str, Any] | None = None, newest_first: bool = True,
                bound: int | None = None) -> tuple[list[Job], Mapping[str, Any] | None]:
        """One page of the tenant's jobs that its home ``shard`` lists (``core.ids``: a
        time-ordered id, so id order is creation order), read from the table itself: from
        ``bound`` on (created_at, inclusive; older if ``newest_first``), and where the next
        page resumes. Strongly consistent, like the rows :meth:`batch_get` reads for the
        index's entries. A row of another tenant that shares the home (their tags collide)
        is never returned."""
        low, high = "0", "7~"  # 10 digits of ms below 2**48: the first is 0-7; "~" > "Z"
        if bound is not None:
            if newest_first:
                high = time_prefix(bound) + "~"
            else:
                low = time_prefix(bound)
        items, last = query_page(
            self._ddb, limit=limit, cursor=cursor, TableName=self.table, ConsistentRead=True,
            KeyConditionExpression="pk = :home AND job_id BETWEEN :low AND :high",
            ExpressionAttributeValues=to_av(
                {":home": home(tenant, shard), ":low": low, ":high": high}),
            ScanIndexForward=not newest_first)
        shards = self.settings.tenant_shards
        return [job_from_item(item) for item in items if item.get("tenant") == tenant
                and listed_at_home(item["job_id"], tenant, int(item["created_at"]), shards)
                ], last

    def _index_keys(self, job_id: str, state: JobState, job: Job | None,
                    sets: Mapping[str, Any] | None = None, *, now: int,
                    start_by: int | None = None,
                    deadline: int | None = None) -> dict[str, Any]:
        """The index attributes a job entering ``state`` at ``now`` must carry (None: must
        not carry). Only creation and :meth:`transition` call this; a lease enters RUNNING
        without it, because the ``sweep_at`` written on entry to QUEUED already bounds it.

        ``start_by``: the row's start window (creation reads it from ``job``). A QUEUED
        row's hand-off deadline is never later than it (or than ``now``, once it passed),
        whoever hands the job off (the
        submission, a parking or a throttle's delay, a wake-up, the ticker, the sweeper's
        re-send): the sweeper looks at a job that waits past its window then, and ends it.
        ``deadline``: the job's ``deadline_at``, bounding a QUEUED row's hand-off deadline
        the same way (the sweeper ends a job still QUEUED past it DEAD).
        """
        shard = shard_of(job_id, self.settings.shards)
        # A row that leaves QUEUED/RUNNING keeps its ``sweep`` entry: removing it would cost
        # an index write per job, and the sweeper passes it once, with a read (see
        # :mod:`.sweep_frontier`). Only an entry into QUEUED/RUNNING writes it.
        keys: dict[str, Any] = {"due_shard": None, "lease_expires_at": None}
        # A SLEEPING job with a hand-off deadline was handed off (a short sleep): the
        # sweeper watches it as a QUEUED one, from its wake-up on; a long sleep waits in
        # ``due`` for the ticker, as a SCHEDULED job does.
        handed_off = state is JobState.SLEEPING and bool((sets or {}).get("lease_expires_at"))
        if state is JobState.SCHEDULED or (state is JobState.SLEEPING and not handed_off):
            keys["due_shard"] = shard
        elif state in (JobState.QUEUED, JobState.RUNNING) or handed_off:
            expires = (sets or {}).get("lease_expires_at") or (
                job.lease_expires_at if job is not None else None)
            if expires is None:
                raise ValueError(f"a {state} job needs lease_expires_at")
            start = max(now, int((sets or {}).get("run_at") or now)) if handed_off else now
            if job is not None and start_by is None:
                start_by = job.extra.get(START_BY)
            if job is not None and deadline is None:
                deadline = job.extra.get(DEADLINE)
            if state is JobState.QUEUED:
                for bound in (start_by, deadline):
                    if bound is not None:
                        # A bound already past makes the row due now (the sweeper's next
                        # pass ends it), never an entry below ``now``: a pass may have
                        # moved the frontier past it already and would not read it again.
                        expires = min(int(expires), max(int(bound), now))
            keys["sweep_shard"] = shard
            keys["sweep_at"] = sweep_bound(start, int(expires), self.settings)
            keys["lease_expires_at"] = expires
        if job is not None:  # creating: drop the Nones
            return {k: v for k, v in keys.items() if v is not None}
        return keys


def sweep_bound(now: int, deadline: int, settings: Settings) -> int:
    """The latest safe ``sweep_at`` for a job queued at ``now`` with hand-off ``deadline``.

    A lease taken at ``now`` or later (by a worker whose clock runs at most the skew grace
    behind ours) expires no earlier than ``now + lease - grace``, and the hand-off itself is
    overdue at ``deadline``: the row cannot need the sweeper before the earlier of the two.
    """
    lease_ms = int(settings.lease_seconds * 1000)
    grace_ms = int(settings.skew_grace_seconds * 1000)
    return min(deadline, now + lease_ms - grace_ms)
