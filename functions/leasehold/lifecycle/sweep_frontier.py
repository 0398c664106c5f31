"""The sweeper's frontier: for each shard of the ``sweep`` index, the ``sweep_at`` below which
the sweeper is done with every entry (docs/design.md, "The sweep index").

A row keeps its index entry when it finishes (removing it would cost a second index write per
job), so the index also holds the entries of finished rows. The sweeper reads each entry once,
as it falls due: a pass queries ``[frontier, cutoff)`` only, and moves the frontier past the
entries it settled. One item in the coordination table holds every shard's frontier; a pass
writes it only when it settled something (an idle pass writes nothing).

Any frontier a pass writes is safe, whoever wrote last: a pass moves it only past entries it
settled itself, and every write that puts a row in the index puts it at or after its own
``now``, so above any frontier a pass that started earlier can write. Writing an older value
(two sweepers at once) only makes the next pass read some entries again.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from leasehold.lifecycle.app import Leasehold


def _key(app: Leasehold) -> dict[str, Any]:
    return {"pk": {"S": "sweep"}, "sk": {"S": f"frontier#{app.settings.jobs_table}"}}


def load(app: Leasehold, dynamodb: Any | None = None) -> dict[int, int]:
    """Each shard's frontier (absent: never swept, 0); read with ``dynamodb`` if given."""
    item = (dynamodb or app.clients.dynamodb).get_item(
        TableName=app.settings.coordination_table, Key=_key(app),
        ConsistentRead=True).get("Item", {})
    return {int(name[1:]): int(value["N"]) for name, value in item.items()
            if name.startswith("f") and name[1:].isdigit()}


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
