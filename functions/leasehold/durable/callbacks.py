"""Completing a callback from outside (``POST /callbacks/{token}``, the CLI, the console).

The callback's record holds its outcome, written once (``attribute_not_exists(outcome)``):
a completion, a failure and the handler's own timeout race for it and exactly one wins.
When the job sleeps waiting for this callback, the outcome and the job's wake-up
(SLEEPING -> QUEUED) are one transaction, so a completed callback never leaves its job
asleep until the timeout. When the job is not asleep yet (a completion before ``wait()``),
only the outcome is written: the job's move to sleep checks for it and runs again at once.
"""

from __future__ import annotations

import hmac
import json
from dataclasses import dataclass
from typing import Any

from leasehold.aws.dynamo import Cancelled
from leasehold.core.spec import encode_json
from leasehold.core.states import JobState
from leasehold.durable import records, runs
from leasehold.errors import Conflict, NotFound
from leasehold.lifecycle.app import Leasehold
from leasehold.lifecycle.suspending import WAITING, wake

#: A completion's value, like a step's result.
MAX_VALUE_BYTES = records.MAX_STEP_BYTES


@dataclass(frozen=True)
class Completion:
    job_id: str
    name: str
    #: What the callback's outcome is now: completed, failed or timed_out.
    outcome: str
    #: False when it had its outcome already (a second completion, or the timeout won).
    changed: bool

    def view(self) -> dict[str, Any]:
        return {"job_id": self.job_id, "callback": self.name, "outcome": self.outcome,
                "changed": self.changed}


def parse_token(token: str) -> tuple[str, str, str]:
    parts = token.split(":", 2)
    if len(parts) != 3 or not all(parts):
        raise NotFound("no such callback")
    return parts[0], parts[1], parts[2]


def find(app: Leasehold, token: str, tenant: str | None) -> dict[str, Any]:
    """The callback's record; NotFound for a wrong secret or another tenant's callback
    (never Forbidden: a token of another tenant must not be told apart from none)."""
    job_id, secret, name = parse_token(token)
    record = records.get(app, job_id, "cb#" + name)
    if record is None or not hmac.compare_digest(str(record.get("secret", "")), secret) or \
            (tenant is not None and record.get("tenant") != tenant):
        raise NotFound("no such callback")
    return record


def complete(app: Leasehold, token: str, tenant: str | None, *, value: Any = None,
             error: str | None = None) -> Completion:
    """Complete (or, with ``error``, fail) a callback once; a repeat changes nothing.

    A callback that an earlier run of its job closed without a value (timed out, failed) is
    open again once the job is re-run by hand (:mod:`.runs`): a completion that comes before
    the replay re-arms it counts for the new run."""
    record = find(app, token, tenant)
    job_id, name = parse_token(token)[0], str(record["name"])
    job = app.store.get(job_id)
    run = runs.current(job)
    if record.get("outcome") and not runs.rearmable(record, run):
        return Completion(job_id, name, str(record["outcome"]), changed=False)
    now = app.now()
    sets: dict[str, Any] = {"outcome": "failed" if error is not None else "completed",
                            "settled_at": now, runs.RECORD_RUN: run}
    if error is not None:
        sets["error"] = str(error)[:2000]
    else:
        sets["value"] = encode_json("value", value, MAX_VALUE_BYTES)
    update = records.update_if(
        app, job_id, "cb#" + name, sets,
        f"attribute_exists(sk) AND (attribute_not_exists(outcome) OR ({runs.REARMABLE}))",
        runs.values(run))
    for tries in range(5):  # the job may change between our read and our write
        if tries:
            job = app.store.get(job_id)
        if job.state.terminal:
            raise Conflict(f"job {job_id} is {job.state}: its callbacks are closed",
                           job_id=job_id)
        if job.state is JobState.SLEEPING and job.extra.get(WAITING) == "callback:" + name:
            try:
                wake(app, job, actor="callback", reason=f"callback {name} {sets['outcome']}",
                     also=({"Update": update},))
            except Cancelled as cancelled:
                if not cancelled.failed(1):
                    raise
                return _settled(app, job_id, name)
            except Conflict:
                continue
            return Completion(job_id, name, sets["outcome"], changed=True)
        if records.update_alone(app, update):
            return Completion(job_id, name, sets["outcome"], changed=True)
        return _settled(app, job_id, name)
    raise Conflict(f"job {job_id} kept changing; try again", job_id=job_id)


def _settled(app: Leasehold, job_id: str, name: str) -> Completion:
    record = records.get(app, job_id, "cb#" + name) or {}
    return Completion(job_id, name, str(record.get("outcome", "")), changed=False)


def job_records(app: Leasehold, job_id: str) -> list[dict[str, Any]]:
    """A job's steps, sleeps and callbacks as the API and console show them. An open
    callback's token is shown: only the job's own tenant reads this, and completing a
    callback takes that tenant's identity as well as the token (the console's "complete
    callback" action for testing)."""
    shown = []
    # In the order of the calls that wrote them (``seq``, see durable/history.py); records
    # from before it had one, by time.
    for sk, record in sorted(records.load(app, job_id).items(),
                             key=lambda pair: (int(pair[1].get("seq", -1)),
                                               int(pair[1].get("at", 0)))):
        kind = str(record.get("kind", sk.split("#", 1)[0]))
        entry: dict[str, Any] = {"kind": kind, "name": record.get("name", sk.split("#", 1)[1]),
                                 "at": int(record.get("at", 0))}
        if record.get("seq") is not None:
            entry["seq"] = int(record["seq"])
        if kind == "step":
            entry["result"] = json.loads(record.get("result", "null"))
        elif kind == "sleep":
            entry["until"] = int(record["until"])
        elif kind == "callback":
            entry.update(timeout_at=int(record["timeout_at"]),
                         outcome=record.get("outcome"))
            if record.get("outcome") == "completed":
                entry["value"] = json.loads(record.get("value", "null"))
            elif record.get("outcome") == "failed":
                entry["error"] = record.get("error")
            if not record.get("outcome"):
                entry["token"] = f"{job_id}:{record['secret']}:{record['name']}"
        elif kind == "child":
            entry["job_id"] = record.get("job_id")
        shown.append(entry)
    return shown
