"""The sweeper's frontier: for each shard of the ``sweep`` index, the ``sweep_at`` below which
the sweeper is done with every entry (docs/design.md, "The sweep index").

A row keeps its index entry when it finishes (removing it would cost a second index write per
job), so the index also holds the entries of finished rows. The sweeper reads each entry once,
as it falls due: a pass queries ``[frontier, cutoff)`` only, and moves the frontier past the
entries it settled. One item in the coordination table holds every shard's frontier; a pass
writes it only when it settled something (an idle pass writes nothing), and a long-running
sweeper reads it once.

Any frontier a pass writes is safe, whoever wrote last: a pass moves it only past entries it
settled itself, and every write that puts a row in the index puts it at or after its own
``now``, so above any frontier a pass that started earlier can write. Writing an older value
(two sweepers at once) only makes the next pass read some entries again.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from leasehold.lifecycle.app import Leasehold

#: The frontiers this process last read or wrote, per (coordination table, jobs table): a
#: long-running sweeper reads the item once, not once a pass. Safe however stale: a frontier
#: lower than the stored one only makes a pass read settled entries again.
_known: dict[tuple[str, str], dict[int, int]] = {}


def _key(app: Leasehold) -> dict[str, Any]:
    return {"pk": {"S": "sweep"}, "sk": {"S": f"frontier#{app.settings.jobs_table}"}}


def load(app: Leasehold, dynamodb: Any | None = None) -> dict[int, int]:
    """Each shard's frontier (absent: never swept, 0); read with ``dynamodb`` if given."""
    item = (dynamodb or app.clients.dynamodb).get_item(
        TableName=app.settings.coordination_table, Key=_key(app),
        ConsistentRead=True).get("Item", {})
    return {int(name[1:]): int(value["N"]) for name, value in item.items()
            if name.startswith("f") and name[1:].isdigit()}


def _name(app: Leasehold) -> tuple[str, str]:
    return app.settings.coordination_table, app.settings.jobs_table


def current(app: Leasehold) -> dict[int, int]:
    """The frontiers as this process last read or wrote them (read once)."""
    name = _name(app)
    if name not in _known or max(_known[name].values(), default=0) > app.now():
        # A frontier is a past cutoff: one ahead of the clock belongs to tables of the same
        # name made again under a clock set back (tests), so read the item again.
        _known[name] = load(app)
    return dict(_known[name])


def save(app: Leasehold, frontier: Mapping[int, int]) -> None:
    """Write the shards' frontiers (one idempotent ``UpdateItem``: a retried write whose
    first try landed simply lands again)."""
    if not frontier:
        return
    shards = sorted(frontier)
    app.clients.dynamodb.update_item(
        TableName=app.settings.coordination_table, Key=_key(app),
        UpdateExpression="SET " + ", ".join(f"#f{s} = :f{s}" for s in shards),
        ExpressionAttributeNames={f"#f{s}": f"f{s}" for s in shards},
        ExpressionAttributeValues={f":f{s}": {"N": str(frontier[s])} for s in shards})
    _known[_name(app)] = {**_known.get(_name(app), {}), **frontier}
