"""The console's bulk bar offers an action only for the states the API applies it to: its
table (console/static/bulk.js) is the API's own (bulk/actions.py APPLIES_TO), held equal here
so the rule has one source and a copy that cannot drift."""

from __future__ import annotations

import re
from pathlib import Path

from leasehold.bulk.actions import APPLIES_TO

BULK_JS = Path(__file__).parents[2] / "functions" / "leasehold" / "console" / "static" / "bulk.js"


def console_table() -> dict[str, set[str]]:
    block = re.search(r"const APPLIES_TO = \{(.*?)\};", BULK_JS.read_text(), re.S)
    assert block, "bulk.js has no APPLIES_TO table"
    return {action: set(re.findall(r'"([A-Z]+)"', states))
            for action, states in re.findall(r"(\w+): \[([^\]]*)\]", block.group(1))}


def test_the_consoles_bulk_actions_apply_to_the_states_the_api_applies_them_to() -> None:
    offered = console_table()
    assert offered, "no action in bulk.js's APPLIES_TO"
    # The console offers retry, cancel and delete (the dead-letters page redrives).
    assert set(offered) == {"retry", "cancel", "delete"}
    for action, states in offered.items():
        assert states == {s.value for s in APPLIES_TO[action]}, action
