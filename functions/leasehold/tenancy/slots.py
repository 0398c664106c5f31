"""A capped tenant's live-job slots moved by ordered conditional writes, no transaction
(issue 46; docs/design.md, "A cap without transactions").

* **Taken before the row is put.** Admission's own conditional update of an admission item
  (the rate, and ``ADD live 1`` under ``live < cap``) also counts the slot in its *bucket*:
  ``ADD in_<b> 1`` and ``b`` into the item's ``open`` set, where ``b`` is the 30 s window of
  the taker's clock (:data:`BUCKET_MS`). The row then records ``slot_at`` (and its
  ``admission_shard``). The counter moves first, so a live counted row always has its slot:
  the cap is never exceeded.
* **Given back after the terminal write**, by a store observer (:class:`GiveBack`): one
  ``UpdateItem`` of ``ADD live -1, out_<b> 1`` (and the outcome for ``/stats``), made by a
  client that never retries (``Clients.client(once=True)``), so that a lost response can
  never return the slot twice. Only an error that proves the write did not land (a
  throttle) is tried again. Its condition, ``out_<b> < in_<b>``, refuses a give-back to a
  bucket the repair closed.
* **Repaired.** Any failure between the two writes (a process killed, a put or a give-back
  that failed or whose response was lost, an increment botocore retried after a lost
  response) leaves a slot counted with no live job: an orphan, never the reverse. Once a
  bucket is closed (:data:`SETTLE_MS` after its end, when no put for it can still land), the
  sweeper's repair (:func:`repair`) counts its rows, read over the bucket's creation times
  the way the listing reads them (the tenant's homes, and the sparse index for derived
  ids), strongly consistently: those still live, and those that
  ended within :data:`SETTLE_MS` (their give-back may still be on its way). Whatever the
  bucket holds beyond them is orphaned, and one conditional update, on the bucket's ``in``
  and ``out`` as read, returns it (``ADD live -n, out_<b> n``); a bucket with nothing left
  is removed. The repair returns slots within 2 minutes of the crash (30 s bucket + 30 s
  settle + a 60 s sweeper period).
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from leasehold.aws.dynamo import (
    condition_failed,
    from_av,
    not_applied,
    to_av,
)
from leasehold.core.jobs import Job
from leasehold.core.states import JobState
from leasehold.lifecycle.app import Leasehold
from leasehold.lifecycle.store_base import ADMISSION_SHARD, COUNTED, SLOT_AT, SLOT_WAS
from leasehold.tenancy.counters import slot_item
from leasehold.tenancy.listing import merged

log = logging.getLogger(__name__)

#: The windows a slot's taking is counted in, by the taker's clock (ms).
BUCKET_MS = 30_000
#: How long after its write a put or a give-back may still land (ms): a bucket is repaired
#: only this long after its end, and a job that ended within it counts as still holding its
#: slot. A submission puts nothing when its slot is older than ``PUT_WITHIN_MS`` (5 s) at
#: the put (``leasehold.lifecycle.submission``), so the put's own retries have 25 s.
SETTLE_MS = 30_000
#: The admission item's set of buckets with slots not all given back.
OPEN = "open"
#: The token of the last submission that took a slot on the item.
LAST = "slot_last"
GIVE_BACK_TRIES = 4


def bucket_of(at: int) -> int:
    return at // BUCKET_MS


def _in(bucket: int) -> str:
    return f"in_{bucket}"


def _out(bucket: int) -> str:
    return f"out_{bucket}"


def counting(update: Mapping[str, Any], at: int, token: str) -> dict[str, Any]:
    """Admission's update of an admission item (its rate and ``ADD live 1``) that also
    counts the slot in the bucket of ``at`` and leaves ``token`` (unique to the submission)
    on the item, under the condition that it is not there already: botocore's retry of a
    try that landed is refused, and the item it returns names the try as ours
    (:func:`ours`). Only when another admission landed on the item in between is the slot
    taken twice (an orphan the repair returns)."""
    bucket = bucket_of(at)
    out = dict(update)
    out["ExpressionAttributeNames"] = {**update["ExpressionAttributeNames"],
                                       "#sin": _in(bucket), "#sopen": OPEN, "#slast": LAST}
    out["ExpressionAttributeValues"] = {**update["ExpressionAttributeValues"],
                                        ":sone": {"N": "1"}, ":sb": {"NS": [str(bucket)]},
                                        ":stoken": {"S": token}}
    expression = str(update["UpdateExpression"])
    assert expression.startswith("SET ") and " ADD " in expression, \
        "admission's update sets the rate and takes the slot by an ADD"
    out["UpdateExpression"] = expression.replace("SET ", "SET #slast = :stoken, ", 1) \
        .replace(" ADD ", " ADD #sin :sone, #sopen :sb, ", 1)
    out["ConditionExpression"] = f"({update['ConditionExpression']}) AND " \
        "(attribute_not_exists(#slast) OR #slast <> :stoken)"
    return out


def ours(item: Mapping[str, Any], token: str) -> bool:
    """Whether a refused admission's item (as it was) shows its own earlier try landed."""
    return item.get(LAST) == token


def give_back(app: Leasehold, tenant: str, shard: int, at: int,
              outcome: JobState | None = None) -> bool:
    """Return one slot taken at ``at`` on admission item ``shard`` (and count ``outcome``
    for ``/stats``): at most once. True when it landed; False when it was refused (its
    bucket closed: the repair returned it) or its fate is unknown (the repair will tell)."""
    bucket = bucket_of(at)
    names = {"#live": "live", "#in": _in(bucket), "#out": _out(bucket)}
    values: dict[str, Any] = {":minus": -1, ":one": 1, ":zero": 0}
    expression = "ADD #live :minus, #out :one"
    if outcome is not None:
        names["#outcome"] = f"count_{outcome.value}"
        expression += ", #outcome :one"
    update = {
        "TableName": app.settings.tenants_table,
        "Key": {"tenant": {"S": slot_item(tenant, shard)}},
        "UpdateExpression": expression,
        # Never below zero, and never more give-backs to a bucket than it took: a bucket the
        # repair closed (it counted this slot an orphan) refuses a late one.
        "ConditionExpression": "#live > :zero AND attribute_exists(#in) AND "
                               "(attribute_not_exists(#out) OR #out < #in)",
        "ExpressionAttributeNames": names, "ExpressionAttributeValues": to_av(values)}
    ddb = app.clients.client("dynamodb", once=True)
    for attempt in range(GIVE_BACK_TRIES):
        try:
            ddb.update_item(**update)
            return True
        except ClientError as exc:
            if condition_failed(exc):
                log.warning("slot of %s (bucket %d) refused: returned by the repair already",
                            slot_item(tenant, shard), bucket)
                return False
            code = exc.response.get("Error", {}).get("Code", "")
            if not not_applied(exc) or attempt == GIVE_BACK_TRIES - 1:
                log.warning("slot of %s (bucket %d) not given back (%s): the repair will",
                            slot_item(tenant, shard), bucket, code)
                return False
        except BotoCoreError:  # no answer: it may have landed; trying again could double it
            log.warning("slot of %s (bucket %d): no answer; the repair will settle it",
                        slot_item(tenant, shard), bucket, exc_info=True)
            return False
        time.sleep(0.05 * 2 ** attempt)  # not applied (a throttle): tried again
    return False


def holds_lean_slot(job: Job) -> bool:
    """Whether ``job`` holds a slot taken before its row (given back after its end)."""
    return bool(job.extra.get(COUNTED)) and job.extra.get(SLOT_AT) is not None


class GiveBack:
    """The store observer that gives a counted job's slot back once it has ended (after the
    terminal write: a crash between them leaves an orphan the repair returns)."""

    def __init__(self, app: Leasehold) -> None:
        self.app = app

    def __call__(self, job: Job, source: JobState | None) -> None:
        if source is None or not source.live or not job.state.terminal or \
                not holds_lean_slot(job):
            return
        give_back(self.app, job.tenant, int(job.extra.get(ADMISSION_SHARD) or 0),
                  int(job.extra[SLOT_AT]), job.state)


# -- the repair -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Bucket:
    """One bucket of one admission item, as the repair counted it."""

    tenant: str
    shard: int
    bucket: int
    taken: int
    returned: int
    #: Rows of the bucket still live, and rows that ended within :data:`SETTLE_MS`.
    live: int
    settling: int

    @property
    def orphans(self) -> int:
        return self.taken - self.returned - self.live - self.settling


def _owner(key: str) -> tuple[str, int]:
    tenant, sep, shard = key.rpartition("#admit#")
    return (tenant, int(shard)) if sep and shard.isdigit() else (key, 0)


def _closed(bucket: int, now: int) -> bool:
    return now >= (bucket + 1) * BUCKET_MS + SETTLE_MS


def _rows(app: Leasehold, tenant: str, shard: int, bucket: int, now: int) -> tuple[int, int]:
    """(rows of the bucket still live, rows that ended within the settle time): every row
    of the tenant created in the times a row of the bucket can have (its ``slot_at`` is
    never before its ``created_at``, and follows it by the submission's intakes only), read
    the way the listing reads them (:func:`leasehold.tenancy.listing.merged`): the tenant's
    homes on the table itself, strongly consistent, where a plain job lives with no index
    entry, merged with the sparse ``by_tenant_shard`` index for derived ids, whose rows are
    then read strongly consistently. Reading the index alone would miss every plain capped
    job, count it absent and return the slot it still holds."""
    start = bucket * BUCKET_MS
    low, high = start - SETTLE_MS, start + BUCKET_MS
    read: dict[str, Job] = {}
    ids = [row[1] for row in itertools.takewhile(
        lambda row: row[0] <= high,
        merged(app, tenant, page=100, newest_first=False, after=(low - 1, "\uffff"),
               read=read))]
    jobs = [read[i] for i in ids if i in read]
    jobs += app.store.batch_get([i for i in ids if i not in read])
    live = settling = 0
    for job in jobs:
        if job.tenant != tenant:
            continue
        if job.extra.get(COUNTED) and int(job.extra.get(ADMISSION_SHARD) or 0) == shard and \
                job.extra.get(SLOT_AT) is not None and \
                bucket_of(int(job.extra[SLOT_AT])) == bucket:
            if job.state.live:
                live += 1
            elif _ended(job) >= now - SETTLE_MS:
                settling += 1
        was = job.extra.get(SLOT_WAS)
        if isinstance(was, Mapping) and int(was.get("shard", 0)) == shard and \
                bucket_of(int(was["at"])) == bucket and int(was["ended"]) >= now - SETTLE_MS:
            settling += 1  # re-run since: its previous run's give-back may be on its way
    return live, settling


def _ended(job: Job) -> int:
    return job.history[-1].at if job.history else int(job.finished_at or 0)


def _item(app: Leasehold, key: str) -> dict[str, Any]:
    response = app.clients.dynamodb.get_item(
        TableName=app.settings.tenants_table, Key={"tenant": {"S": key}}, ConsistentRead=True)
    return from_av(response.get("Item") or {})


def count_bucket(app: Leasehold, tenant: str, shard: int, bucket: int, now: int
                 ) -> tuple[Bucket, dict[str, Any]] | None:
    """The bucket as its item holds it and its rows say (the item read first, so a row that
    ends in between counts as settling, never as an orphan)."""
    item = _item(app, slot_item(tenant, shard))
    if bucket not in {int(b) for b in item.get(OPEN) or ()}:
        return None
    live, settling = _rows(app, tenant, shard, bucket, now)
    return Bucket(tenant, shard, bucket, int(item.get(_in(bucket), 0)),
                  int(item.get(_out(bucket), 0)), live, settling), item


def settle(app: Leasehold, tenant: str, shard: int, bucket: int, now: int) -> int:
    """Return a closed bucket's orphaned slots (and remove the bucket once nothing is left
    in it) by one update conditioned on its ``in`` and ``out`` as counted: a give-back that
    landed in between refuses it (the next pass counts again). Returns the slots returned."""
    counted = count_bucket(app, tenant, shard, bucket, now)
    if counted is None:
        return 0
    found, _ = counted
    orphans = found.orphans
    if orphans < 0:
        # A job that ended within the settle time whose give-back has landed counts as
        # settling too (it cannot be told from one whose give-back is on its way): fewer
        # slots than live and settling rows. Nothing is returned while that is so.
        return 0
    empty = found.live == 0 and found.settling == 0
    if orphans == 0 and not empty:
        return 0
    names = {"#in": _in(bucket), "#out": _out(bucket)}
    values: dict[str, Any] = {":in": found.taken, ":out": found.returned}
    condition = "#in = :in AND " + (
        "#out = :out" if found.returned else "(attribute_not_exists(#out) OR #out = :out)")
    parts = []
    if orphans:
        names["#live"] = "live"
        values[":minus"] = -orphans
        parts.append("ADD #live :minus" + ("" if empty else ", #out :n"))
        if not empty:
            values[":n"] = orphans
    if empty:  # every slot of the bucket is back now: forget it
        names["#open"] = OPEN
        values[":b"] = {bucket}
        parts.append("REMOVE #in, #out DELETE #open :b")
    try:
        app.clients.dynamodb.update_item(
            TableName=app.settings.tenants_table,
            Key={"tenant": {"S": slot_item(tenant, shard)}},
            UpdateExpression=" ".join(parts), ConditionExpression=condition,
            ExpressionAttributeNames=names, ExpressionAttributeValues=to_av(values))
    except ClientError as exc:
        if not condition_failed(exc):
            raise
        return 0  # changed since it was counted (or our own lost response): next pass
    if orphans:
        log.warning("returned %d orphaned slot(s) of %s (bucket %d)", orphans,
                    slot_item(tenant, shard), bucket)
    return orphans


def _open_items(app: Leasehold) -> Iterator[dict[str, Any]]:
    kwargs: dict[str, Any] = {
        "TableName": app.settings.tenants_table,
        "FilterExpression": "attribute_exists(#open)",
        "ProjectionExpression": "tenant, #open", "ExpressionAttributeNames": {"#open": OPEN}}
    while True:
        response = app.clients.dynamodb.scan(**kwargs)
        for raw in response.get("Items", []):
            yield from_av(raw)
        if "LastEvaluatedKey" not in response:
            return
        kwargs["ExclusiveStartKey"] = response["LastEvaluatedKey"]


def repair(app: Leasehold, now: int) -> int:
    """The sweeper's pass: every closed bucket of every admission item settled (see the
    module's docstring). Returns the orphaned slots returned."""
    returned = 0
    for item in _open_items(app):
        tenant, shard = _owner(str(item["tenant"]))
        for bucket in sorted(int(b) for b in item.get(OPEN) or ()):
            if not _closed(bucket, now):
                continue
            try:
                returned += settle(app, tenant, shard, bucket, now)
            except (ClientError, BotoCoreError):
                log.warning("could not settle bucket %d of %s", bucket, item["tenant"],
                            exc_info=True)
    return returned


def orphans(app: Leasehold, tenant: str, shards: int, now: int) -> int:
    """Slots of ``tenant`` counted with no live job (``/stats``): what the next repair
    returns, in the buckets closed already (a younger bucket's puts may still land)."""
    found = 0
    for shard in range(shards):
        item = _item(app, slot_item(tenant, shard))
        for bucket in (int(b) for b in item.get(OPEN) or ()):
            if _closed(bucket, now):
                counted = count_bucket(app, tenant, shard, bucket, now)
                found += max(0, counted[0].orphans) if counted else 0
    return found


def install(app: Leasehold) -> None:
    """Slots given back after the end (a store observer), and returned by the sweeper's
    repair when a crash or a lost write left them orphaned."""
    app.store.observers.append(GiveBack(app))
    app.repairs["slots"] = repair
