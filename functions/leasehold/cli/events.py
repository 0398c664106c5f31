"""``leasehold events tail``: job state events from the local runtime's event log.

The log outlives a run of ``leasehold dev``; each run begins with a marker line, so what came
before the current run is shown as history (or not at all), never as live.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import deque
from pathlib import Path
from typing import Any

from leasehold.cli.parsing import command, group

#: ``leasehold.events.publishing.RUNTIME_SOURCE``, spelt here so that every `leasehold`
#: command does not import boto3 (a quarter of a second) to parse its arguments.
RUNTIME_SOURCE = "leasehold.dev"

DEFAULT_LOG = str(Path(os.environ.get("LEASEHOLD_STATE_DIR", ".leasehold")) / "events.jsonl")


def register(subparsers: Any) -> None:
    verbs = group(subparsers, "events", "job state events of the local runtime", [
        "leasehold events tail -f", "leasehold events tail -n 50 --task fail"])
    tail_parser = command(verbs, "tail", "print the latest job state events of the current "
                                         "run of `leasehold dev`, and with -f follow new ones", [
        "leasehold events tail                   # the last 10 events of this run",
        "leasehold events tail -f --task echo    # follow one task's events",
        "leasehold events tail -n 100 --job 01JABCDEF0123456789ABCDEFG",
        "leasehold events tail --all --tenant acme   # earlier runs too",
    ], run_tail, client=False)
    tail_parser.add_argument(
        "--log", default=os.environ.get("LEASEHOLD_EVENT_LOG", DEFAULT_LOG),
        help="the event log (default: what `leasehold dev` writes, .leasehold/events.jsonl, "
             "or $LEASEHOLD_EVENT_LOG), e.g. --log /tmp/events.jsonl")
    tail_parser.add_argument("-f", "--follow", action="store_true",
                             help="keep printing new events until Ctrl-C")
    tail_parser.add_argument("-n", "--lines", type=int, default=10, metavar="N",
                             help="how many of the latest events to print first (default 10; "
                                  "0: only new ones), e.g. -n 50")
    tail_parser.add_argument("--all", action="store_true",
                             help="include earlier runs' events (marked as such)")
    tail_parser.add_argument("--job", help="only this job's events, e.g. --job 01JABC...")
    tail_parser.add_argument("--task", help="only this task's events, e.g. --task echo")
    tail_parser.add_argument("--tenant", help="only this tenant's events, e.g. --tenant acme")
    tail_parser.add_argument("--json", action="store_true",
                             help="print each event as one JSON line, e.g. --json | jq .detail")


def _wanted(args: argparse.Namespace, event: dict[str, Any]) -> bool:
    if event.get("source") == RUNTIME_SOURCE:
        return True
    detail = event.get("detail") or {}
    return all(want is None or detail.get(key) == want for key, want in
               (("job_id", args.job), ("task", args.task), ("tenant", args.tenant)))


#: How many event ids ``tail`` keeps to drop a repeat: the relay publishes at least once (one
#: killed mid-batch writes the batch's events again when it resumes, with the same ids).
REMEMBERED = 10_000


class Repeats:
    """The ids of the last :data:`REMEMBERED` events shown."""

    def __init__(self, size: int = REMEMBERED) -> None:
        self.order: deque[str] = deque()
        self.ids: set[str] = set()
        self.size = size

    def first(self, event: dict[str, Any]) -> bool:
        """Whether ``event`` was not shown yet (an event without an id always is new)."""
        event_id = (event.get("detail") or {}).get("event_id")
        if event_id is None:
            return True
        if event_id in self.ids:
            return False
        self.ids.add(event_id)
        self.order.append(event_id)
        if len(self.order) > self.size:
            self.ids.discard(self.order.popleft())
        return True


def _line(args: argparse.Namespace, event: dict[str, Any]) -> str:
    if args.json:
        return json.dumps(event)
    if event.get("source") == RUNTIME_SOURCE:
        return f"--- leasehold dev started at {event['time']} (pid {event['detail']['pid']}) ---"
    detail = event["detail"]
    return (f"{event['time']}  {event['detail-type']:<16} {detail['job_id']}  {detail['task']}  "
            f"{detail.get('previous_state') or '-'} -> {detail['state']}")


def backlog(args: argparse.Namespace, path: Path, repeats: Repeats | None = None
            ) -> tuple[list[dict[str, Any]], int]:
    """The events to print first (the current run's, or all with --all; the last -n of them,
    each change once) and the byte offset to follow from."""
    from leasehold.events.publishing import tail

    repeats = repeats or Repeats()

    shown: deque[dict[str, Any]] = deque(maxlen=max(0, args.lines) or None)
    earlier = False
    size = path.stat().st_size
    for event in tail(path):
        if event.get("source") == RUNTIME_SOURCE and not args.all:
            earlier = earlier or bool(shown)
            shown.clear()  # a new run began: what came before is history
        if _wanted(args, event) and repeats.first(event):
            shown.append(event)
    if args.lines <= 0:
        shown.clear()
    if earlier and not args.json:
        print("(events of earlier runs are hidden; --all shows them)", file=sys.stderr)
    return list(shown), size


def run_tail(args: argparse.Namespace) -> int:
    from leasehold.events.publishing import tail

    path = Path(args.log)
    first: list[dict[str, Any]] = []
    start = 0
    repeats = Repeats()
    if not path.exists():
        message = (f"no event log at {path}: `leasehold dev` writes it (its banner names it); "
                   "is it running, from this directory? Or pass --log.")
        if not args.follow:
            print(f"error: {message}", file=sys.stderr)
            return 1
        print(f"waiting: {message}", file=sys.stderr, flush=True)
    else:
        first, start = backlog(args, path, repeats)
    try:
        for event in first:
            print(_line(args, event), flush=True)
        if args.follow:
            for event in tail(path, follow=True, start=start):
                if _wanted(args, event) and repeats.first(event):
                    print(_line(args, event), flush=True)
    except KeyboardInterrupt:
        pass
    return 0
