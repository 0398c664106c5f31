"""The workflow graph as a readable tree (the CLI's ``workflow status``). Pure.

A DAG is not a tree: each step is drawn in full under the first step that leads to it, and
where another dependency leads to it again it appears as a one-line back-reference. A step
with several dependencies lists them, so a fan-in reads correctly wherever it is drawn.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any


def render(view: Mapping[str, Any]) -> str:
    """Text for a workflow view (``WorkflowDetail.view()`` or the API's JSON)."""
    steps: Sequence[Mapping[str, Any]] = view.get("steps", [])
    by_id = {s["id"]: s for s in steps}
    children: dict[str, list[str]] = {s["id"]: [] for s in steps}
    for step in steps:
        for dep in step.get("depends_on", []):
            if dep in children:
                children[dep].append(step["id"])
    title = view.get("name") or "workflow"
    lines = [f"{title} {view['workflow_id']}  {view['state']}"]
    if view.get("reason"):
        lines.append(f"  reason: {view['reason']}")
    drawn: set[str] = set()
    roots = [s["id"] for s in steps if not s.get("depends_on")]

    def draw(step_id: str, prefix: str, last: bool) -> None:
        branch, extension = ("└── ", "    ") if last else ("├── ", "│   ")
        step = by_id[step_id]
        if step_id in drawn:
            lines.append(f"{prefix}{branch}{step_id}  ↑ (shown above)")
            return
        drawn.add(step_id)
        lines.append(prefix + branch + _label(step))
        kids = children[step_id]
        for i, kid in enumerate(kids):
            draw(kid, prefix + extension, i == len(kids) - 1)

    for i, root in enumerate(roots):
        draw(root, "", i == len(roots) - 1)
    return "\n".join(lines)


def _label(step: Mapping[str, Any]) -> str:
    text = f"{step['id']}  {step['state']}"
    if step.get("task") and step["task"] != step["id"]:
        text += f"  [{step['task']}]"
    deps = step.get("depends_on", [])
    if len(deps) > 1:
        text += f"  after {', '.join(deps)}"
    if step["state"] == "WAITING" and step.get("waiting_for"):
        text += f"  (waiting for {step['waiting_for']})"
    if step["state"] == "SUCCEEDED" and step.get("result") is not None:
        result = json.dumps(step["result"], separators=(",", ":"), ensure_ascii=False)
        text += f"  -> {result if len(result) <= 60 else result[:57] + '...'}"
    error = step.get("error")
    if error and step["state"] not in ("SUCCEEDED", "CANCELLED"):
        text += f"  {error.get('type')}: {str(error.get('message', ''))[:80]}"
    return text
