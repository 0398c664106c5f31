"""The control table: each tenant's home Region and each cell's Region lease.

On AWS it is an MRSC global table (multi-Region strong consistency, ``cdk/control.py``): a
conditional write is checked against every Region, so two cells can never both win the same
write, and a Region cut off from the other two can write nothing (it fences itself). It is
read rarely (cached, :mod:`leasehold.cells.cell`) and written only when a tenant gets its
first home, on a failover or failback, and when a cell renews its lease. It has no
transaction, TTL or index, none of which MRSC allows.

Items (key ``pk``):

* ``tenant#<tenant>``: ``home`` (a Region), ``epoch`` (bumped by each move), ``moved_at``;
* ``region#<region>``: ``epoch`` (bumped by each failover away from it), ``state``
  (``active`` or ``fenced``), ``lease_until`` (ms), ``url`` (the cell's API), ``renewed_at``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from botocore.exceptions import ClientError

from leasehold.errors import Conflict, NotFound


class RegionState(StrEnum):
    ACTIVE = "active"
    FENCED = "fenced"


@dataclass(frozen=True)
class Home:
    tenant: str
    region: str
    epoch: int
    #: The Region a failover moved the tenant from ("" if none).
    origin: str = ""


@dataclass(frozen=True)
class RegionRecord:
    region: str
    epoch: int
    state: RegionState
    lease_until: int
    url: str | None


class LeaseRefused(Conflict):
    """The Region lease was not renewed: the Region was failed over (its epoch bumped, or
    it is fenced)."""

    code = "region_lease_refused"


def _tenant_key(tenant: str) -> dict[str, Any]:
    return {"pk": {"S": f"tenant#{tenant}"}}


def _region_key(region: str) -> dict[str, Any]:
    return {"pk": {"S": f"region#{region}"}}


def _conditional(exc: ClientError) -> bool:
    return exc.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException"


def _home(item: dict[str, Any]) -> Home:
    return Home(tenant=item["pk"]["S"].partition("#")[2], region=item["home"]["S"],
                epoch=int(item["epoch"]["N"]), origin=item.get("origin", {}).get("S", ""))


def _region(item: dict[str, Any]) -> RegionRecord:
    return RegionRecord(region=item["pk"]["S"].partition("#")[2],
                        epoch=int(item["epoch"]["N"]),
                        state=RegionState(item["state"]["S"]),
                        lease_until=int(item.get("lease_until", {}).get("N", "0")),
                        url=item.get("url", {}).get("S"))


class ControlTable:
    """The control table's few operations over one low-level DynamoDB client."""

    def __init__(self, client: Any, table: str) -> None:
        self.client = client
        self.table = table

    # -- tenants' homes ----------------------------------------------------------------

    def home(self, tenant: str) -> Home | None:
        item = self.client.get_item(TableName=self.table, Key=_tenant_key(tenant),
                                    ConsistentRead=True).get("Item")
        return _home(item) if item else None

    def claim_home(self, tenant: str, region: str, now: int) -> Home:
        """Make ``region`` the home of a tenant that has none; the home it has otherwise (one
        conditional put: two cells claiming at once cannot both win)."""
        try:
            self.client.put_item(
                TableName=self.table,
                Item={**_tenant_key(tenant), "home": {"S": region}, "epoch": {"N": "1"},
                      "moved_at": {"N": str(now)}},
                ConditionExpression="attribute_not_exists(pk)")
        except ClientError as exc:
            if not _conditional(exc):
                raise
            home = self.home(tenant)
            if home is None:  # pragma: no cover - a home is never deleted
                raise
            return home
        return Home(tenant=tenant, region=region, epoch=1)

    def move_home(self, tenant: str, to: str, now: int, *, epoch: int | None = None,
                  origin: str | None = None) -> Home:
        """Re-home ``tenant`` to ``to``, bumping its epoch; with ``epoch``, only if its epoch
        is still that (two operators' failovers cannot interleave). ``origin``: the Region
        a failover moved it from (a failback without names moves it back)."""
        values: dict[str, Any] = {":to": {"S": to}, ":one": {"N": "1"},
                                  ":zero": {"N": "0"}, ":now": {"N": str(now)},
                                  ":origin": {"S": origin or ""}}
        condition = None
        if epoch is not None:
            condition = "epoch = :seen"
            values[":seen"] = {"N": str(epoch)}
        try:
            answer = self.client.update_item(
                TableName=self.table, Key=_tenant_key(tenant),
                UpdateExpression="SET home = :to, moved_at = :now, origin = :origin, "
                                 "epoch = if_not_exists(epoch, :zero) + :one",
                ExpressionAttributeValues=values, ReturnValues="ALL_NEW",
                **({"ConditionExpression": condition} if condition else {}))
        except ClientError as exc:
            if _conditional(exc):
                raise Conflict(f"tenant {tenant!r} was moved meanwhile (its epoch is no "
                               f"longer {epoch})", tenant=tenant) from exc
            raise
        return _home(answer["Attributes"])

    def homes(self) -> Iterator[Home]:
        """Every tenant's home (an operator's listing: a scan of a small table)."""
        paginator = self.client.get_paginator("scan")
        for page in paginator.paginate(TableName=self.table, ConsistentRead=True):
            for item in page.get("Items", []):
                if item["pk"]["S"].startswith("tenant#"):
                    yield _home(item)

    # -- Region leases -----------------------------------------------------------------

    def regions(self) -> Iterator[RegionRecord]:
        """Every Region that has (had) a cell: its lease, state and epoch (an operator's
        listing, as :meth:`homes`)."""
        paginator = self.client.get_paginator("scan")
        for page in paginator.paginate(TableName=self.table, ConsistentRead=True):
            for item in page.get("Items", []):
                if item["pk"]["S"].startswith("region#"):
                    yield _region(item)

    def region(self, region: str) -> RegionRecord | None:
        item = self.client.get_item(TableName=self.table, Key=_region_key(region),
                                    ConsistentRead=True).get("Item")
        return _region(item) if item else None

    def renew(self, region: str, *, epoch: int, lease_until: int, url: str | None,
              now: int) -> RegionRecord:
        """Extend ``region``'s lease to ``lease_until`` at ``epoch`` (0: the Region's first
        lease, epoch 1); refused (:class:`LeaseRefused`) when the Region was failed over
        since: fenced, or its epoch is no longer ``epoch``."""
        values: dict[str, Any] = {":until": {"N": str(lease_until)}, ":now": {"N": str(now)},
                                  ":active": {"S": RegionState.ACTIVE.value}}
        names = {"#state": "state"}
        if epoch == 0:
            update = "SET #state = :active, epoch = :epoch, lease_until = :until, " \
                     "renewed_at = :now"
            condition = "attribute_not_exists(pk)"
            values[":epoch"] = {"N": "1"}
        else:
            update = "SET lease_until = :until, renewed_at = :now"
            condition = "#state = :active AND epoch = :epoch"
            values[":epoch"] = {"N": str(epoch)}
        if url:
            update += ", #url = :url"
            names["#url"] = "url"
            values[":url"] = {"S": url}
        try:
            answer = self.client.update_item(
                TableName=self.table, Key=_region_key(region), UpdateExpression=update,
                ConditionExpression=condition, ExpressionAttributeNames=names,
                ExpressionAttributeValues=values, ReturnValues="ALL_NEW")
        except ClientError as exc:
            if _conditional(exc):
                raise LeaseRefused(f"Region {region}'s lease at epoch {epoch} was refused",
                                   region=region) from exc
            raise
        return _region(answer["Attributes"])

    def fence(self, region: str, now: int) -> RegionRecord:
        """Fail over away from ``region``: bump its epoch and mark it fenced, so its cell's
        next renewal is refused. A cell cut off from the table learns nothing, and stops
        when the lease it holds runs out (``lease_until``, returned)."""
        return self._set_state(region, "SET #state = :state, epoch = epoch + :one, "
                                        "fenced_at = :now",
                               {":state": {"S": RegionState.FENCED.value},
                                ":one": {"N": "1"}, ":now": {"N": str(now)}})

    def restore(self, region: str) -> RegionRecord:
        """Failback: let ``region``'s cell take its lease again (at the bumped epoch)."""
        return self._set_state(region, "SET #state = :state",
                               {":state": {"S": RegionState.ACTIVE.value}})

    def _set_state(self, region: str, expression: str,
                   values: dict[str, Any]) -> RegionRecord:
        """One update of ``region``'s record (which must exist), answered as it is now."""
        try:
            answer = self.client.update_item(
                TableName=self.table, Key=_region_key(region), UpdateExpression=expression,
                ConditionExpression="attribute_exists(pk)",
                ExpressionAttributeNames={"#state": "state"},
                ExpressionAttributeValues=values, ReturnValues="ALL_NEW")
        except ClientError as exc:
            if _conditional(exc):
                raise NotFound(f"Region {region} has no cell", region=region) from exc
            raise
        return _region(answer["Attributes"])


def create_control_table(client: Any, table: str) -> None:
    """The control table as the local runtime and tests make it (the CDK construct makes
    the MRSC global table on AWS): one string key, on demand."""
    try:
        client.create_table(TableName=table, BillingMode="PAY_PER_REQUEST",
                            AttributeDefinitions=[{"AttributeName": "pk",
                                                   "AttributeType": "S"}],
                            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}])
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") != "ResourceInUseException":
            raise
        return
    client.get_waiter("table_exists").wait(TableName=table,
                                           WaiterConfig={"Delay": 1, "MaxAttempts": 30})
