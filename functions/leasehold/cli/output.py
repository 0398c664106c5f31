"""How the CLI shows things: tables, a job's fields, JSON for scripts, errors on stderr."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

from leasehold.cli.client import ApiError
from leasehold.cli.inputs import UsageError


def table(rows: Sequence[Sequence[Any]], headers: Sequence[str]) -> str:
    cells = [[("" if c is None else str(c)) for c in row] for row in rows]
    widths = [max([len(h), *(len(r[i]) for r in cells)]) for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
              for r in cells]
    return "\n".join(lines)


def fields(pairs: Sequence[tuple[str, Any]]) -> str:
    """``name  value`` lines, ``-`` for nothing; names padded to 14 characters, or past the
    longest with two spaces when one would reach its value (``created before`` ran into it)."""
    longest = max((len(name) for name, _ in pairs), default=0)
    width = 14 if longest < 14 else longest + 2
    return "\n".join(f"{name:<{width}}{'-' if value is None else value}"
                     for name, value in pairs)


def short(value: Any, limit: int = 40) -> str:
    text = value if isinstance(value, str) else json.dumps(value)
    return text if len(text) <= limit else text[:limit - 1] + "…"


def due(seconds: float | None) -> str:
    """``due in 12 s``: a job waiting for its time is not ready work."""
    if seconds is None:
        return ""
    if seconds < 120:
        return f"due in {seconds:g} s"
    if seconds < 7200:
        return f"due in {seconds / 60:.0f} min"
    return f"due in {seconds / 3600:.1f} h"


def state_of(job: dict[str, Any]) -> str:
    """The state, and for a job waiting for its time, how long (``QUEUED, due in 12 s``)."""
    waiting = due(job.get("due_in_seconds"))
    return f"{job['state']}, {waiting}" if waiting else job["state"]


def show_job(job: dict[str, Any], history: bool = False) -> str:
    pairs: list[tuple[str, Any]] = [
        ("job", job["job_id"]), ("task", job["task"]), ("state", state_of(job)),
        ("pool/priority", f"{job['pool']}/{job['priority']}"),
        ("attempts", f"{job['attempts']}/{job['max_attempts']}"),
        ("created", job["created_at"]), ("run at", job.get("run_at")),
        ("started", job.get("started_at")), ("finished", job.get("finished_at")),
    ]
    if job.get("duplicate"):
        pairs.append(("unique", "a live job with this unique key answered: this is that job"))
    if job.get("coalesced"):
        pairs.append(("debounce", "debounced into this job, which carries your payload"))
    if job.get("waiting_for"):
        pairs.append(("waiting", job["waiting_for"]))
    if job.get("flow"):
        pairs.append(("flow", flow_text(job["flow"])))
    if job.get("waiting"):
        pairs.append(("sleeping", f"until {job.get('sleeping_until')} ({job['waiting']})"))
    if job.get("parent_id"):
        pairs.append(("parent", f"{job['parent_id']} (on its end: {job.get('on_parent_end')})"))
    if job.get("code_version"):
        pairs.append(("code version", f"{job['code_version']} (first run)"))
    if job.get("cancel_requested") and job["state"] not in ("CANCELLED", "SUCCEEDED", "DEAD"):
        pairs.append(("cancel", "requested: the job stops at its next heartbeat"))
    if job.get("progress") is not None:
        pairs.append(("progress", short(job["progress"], 70)))
    if job.get("result") is not None:
        pairs.append(("result", short(job["result"], 70)))
    if job.get("error"):
        pairs.append(("error", f"{job['error']['type']}: {short(job['error']['message'], 70)}"))
    for warning in job.get("warnings") or ():
        pairs.append(("warning", warning))
    text = fields(pairs)
    if (job.get("error") or {}).get("traceback"):
        text += "\n\n" + job["error"]["traceback"].rstrip()
    if job.get("children"):
        text += "\n\n" + children_table(job["children"])
        if job.get("more_children"):
            text += f"\n(the first {len(job['children'])} children, by name)"
    if history:
        text += "\n\n" + table([(h["at"], h["from"] or "", h["to"], h["by"], h["reason"]
                                 + (f" on {h['code_version']}" if h.get("code_version") else ""))
                                for h in job.get("history", [])],
                               ["AT", "FROM", "TO", "BY", "REASON"])
    return text


def children_table(children: list[dict[str, Any]]) -> str:
    """A durable parent's children: what each call site spawned, and where it is."""
    return table([(c["name"], c["job_id"], c.get("task"), c.get("state") or "gone",
                   c["on_parent_end"] if c.get("own", True) else "not its own")
                  for c in children], ["CHILD", "JOB", "TASK", "STATE", "ON PARENT END"])


def flow_text(flow: dict[str, Any]) -> str:
    """A job view's ``flow`` as one line, as the console's job page shows it."""
    parts = []
    if c := flow.get("concurrency"):
        parts.append(f"concurrency {c['key']} (limit {c['limit']})")
    if t := flow.get("throttle"):
        parts.append(f"throttle {t['key']} ({t['limit']} per {t['period_seconds']:g} s, "
                     f"burst {t['burst']})")
    if u := flow.get("unique"):
        parts.append(f"unique {u['key']}")
    if d := flow.get("debounce"):
        parts.append(f"debounce {d['key']} ({d['seconds']:g} s)")
    if flow.get("start_by"):
        parts.append(f"start by {flow['start_by']}")
    return " · ".join(parts)


def jobs_table(jobs: list[dict[str, Any]]) -> str:
    return table([(j["job_id"], j["task"], state_of(j), j["priority"], j["attempts"],
                   j["created_at"], j.get("finished_at")) for j in jobs],
                 ["JOB", "TASK", "STATE", "PRIORITY", "ATTEMPTS", "CREATED", "FINISHED"])


def more(page: dict[str, Any]) -> str:
    cursor = page.get("next_cursor")
    return f"\n\nmore: --cursor {cursor}" if cursor else ""


def tree(workflow: dict[str, Any]) -> str:
    """A workflow's graph as text. Imported when drawn: ``leasehold.workflows`` brings boto3,
    which every command would otherwise load just to parse its arguments."""
    from leasehold.workflows.tree import render

    return render(workflow)


def emit(args: argparse.Namespace, data: Any, text: str) -> None:
    print(json.dumps(data, indent=2) if args.json else text)


def fail(error: ApiError | UsageError) -> int:
    message = f"error: {error}"
    if isinstance(error, ApiError) and error.retry_after:
        message += f" (retry after {error.retry_after}s)"
    print(message, file=sys.stderr)
    return 1
