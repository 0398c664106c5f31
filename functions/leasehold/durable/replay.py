"""The replay check (``leasehold replay``, issue 36): run the code deployed now against the
recorded histories of live durable jobs, in-process, without calling any step's function,
and say which jobs would stop as ``NonDeterministic`` when they resume.

The replayer is the runner's rule (:class:`.history.History`) with a recorded history in
place of the store: each durable call takes its place and is answered from its record (a
step's result, a callback's outcome, a child's id, a patch marker). The replay ends, with
the job found fine, where the real job would do new work or wait: a call past the
history's end, a sleep or a wait the history does not show ended, a ``ctx.once`` (its
results are not in the history). It ends with the job found breaking on a mismatch
(``NonDeterministic``), on a task the code no longer has, and on an exception the handler
raises outside a step (code between steps runs in a replay, as it does on every resume).

A history document (one line of ``leasehold export-histories``, or what
:func:`history_of` builds from the API): ``{"job": <the job as GET /jobs/{id} shows it>,
"records": <GET /jobs/{id}/steps's "steps">, "children": {<id>: <summary>}}``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from leasehold.core.context import JobContext
from leasehold.core.jobs import Job
from leasehold.core.registry import TaskRegistry
from leasehold.core.schemas import task_input
from leasehold.core.suspension import CallbackFailed, CallbackTimeout, NonDeterministic
from leasehold.durable.callbacks import job_records
from leasehold.durable.children import CHILD
from leasehold.durable.history import PATCH, SEQ, History
from leasehold.durable.runner import summary
from leasehold.errors import ValidationError
from leasehold.lifecycle.app import Leasehold

_KEYS = {"step": "step#", "sleep": "sleep#", "callback": "cb#", "child": CHILD,
         "patch": PATCH}
_TERMINAL = {"SUCCEEDED", "DEAD", "CANCELLED", "EXPIRED"}


class _Reached(BaseException):
    """The replay got where the real job does new work or waits: the history is checked."""


@dataclass(frozen=True)
class Verdict:
    job_id: str
    task: str
    ok: bool
    #: ``replays``, ``non_deterministic``, ``unknown_task`` or ``raised``.
    outcome: str
    detail: str
    #: The job's ``ctx.patched`` answers in this replay (change id -> answer).
    patches: Mapping[str, bool]

    def view(self) -> dict[str, Any]:
        return {"job_id": self.job_id, "task": self.task, "ok": self.ok,
                "outcome": self.outcome, "detail": self.detail,
                "patches": dict(self.patches)}


def records_by_key(records: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """The API's records (``kind``, ``name``, ...) by their sort key, as the runner keys
    them."""
    out: dict[str, dict[str, Any]] = {}
    for record in records:
        kind = str(record.get("kind"))
        if kind not in _KEYS:
            raise ValidationError("records", f"unknown record kind {kind!r}")
        out[_KEYS[kind] + str(record.get("name"))] = dict(record)
    return out


class Replayer:
    """What ``ctx.step``, ``ctx.sleep``, ... do in a replay (the :class:`Durable` provider)."""

    def __init__(self, job_id: str, records: Sequence[Mapping[str, Any]],
                 children: Mapping[str, Mapping[str, Any]]) -> None:
        self.stored = records_by_key(records)
        self.history = History(job_id, self.stored)
        self.children = children
        self.patches: dict[str, bool] = {}
        self._sleeps = 0
        self._spawns: dict[str, int] = {}
        self._used: set[str] = set()

    def _record(self, sk: str) -> dict[str, Any]:
        """Take the call's place (checked) and its record; past the end: the replay ends."""
        if sk in self._used and not sk.startswith(PATCH):
            raise _Reached()  # the runner refuses it as DurableMisuse: not a replay matter
        self._used.add(sk)
        record = self.stored.get(sk)
        self.history.take(sk, legacy=record is not None and record.get(SEQ) is None)
        if record is None:
            raise _Reached()
        return record

    def _ended(self) -> bool:
        """Whether the history goes on past the place just taken (the wait ended)."""
        return self.history.position < self.history.length

    def step(self, name: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        return self._record("step#" + str(name)).get("result")

    def sleep_for(self, seconds: float) -> None:
        self._sleep()

    def sleep_until(self, when_ms: int) -> None:
        self._sleep()

    def _sleep(self) -> None:
        self._sleeps += 1
        self._record(f"sleep#{self._sleeps}")
        if not self._ended():
            raise _Reached()  # the job sleeps here

    def callback(self, name: str, timeout_seconds: float) -> Any:
        record = self._record("cb#" + str(name))
        return _Callback(self, name, record)

    def spawn(self, name: str, task: str, payload: Any, options: Mapping[str, Any]) -> str:
        if not name:
            count = self._spawns.get(task, 0) + 1
            self._spawns[task] = count
            name = f"{task}.{count}"
        return str(self._record(CHILD + name).get("job_id"))

    def wait_for(self, job_ids: Sequence[str]) -> list[dict[str, Any]]:
        found = [self.children.get(job_id) for job_id in job_ids]
        if any(child is None or child.get("state") not in _TERMINAL for child in found):
            raise _Reached()  # the job waits here
        return [dict(child) for child in found if child is not None]

    def patched(self, change: str) -> bool:
        sk = PATCH + str(change)
        if sk not in self.patches:
            answer = self.history.patched(sk)
            if answer is None:
                self.history.take(sk)
                answer = True
            self.patches[sk] = answer
        return self.patches[sk]

    def deprecate_patch(self, change: str) -> None:
        self.history.deprecated(PATCH + str(change))

    def finished(self) -> None:
        self.history.finished()


class _Callback:
    def __init__(self, replayer: Replayer, name: str, record: Mapping[str, Any]) -> None:
        self._replayer = replayer
        self.name = name
        self.token = f"replay:{name}"
        self._record = record

    def wait(self) -> Any:
        outcome = self._record.get("outcome")
        if outcome == "completed":
            return self._record.get("value")
        if outcome == "failed":
            raise CallbackFailed(f"callback {self.name!r} failed: {self._record.get('error')}",
                                 name=self.name)
        if outcome == "timed_out":
            raise CallbackTimeout(f"callback {self.name!r} was not completed before its "
                                  "timeout", name=self.name)
        raise _Reached()  # the job waits here


def _no_once(name: str, fn: Callable[[], Any]) -> Any:
    raise _Reached()  # ctx.once's results are not in the history: checked up to here


def replay(registry: TaskRegistry, document: Mapping[str, Any]) -> Verdict:
    """Replay one history document with the code in ``registry``."""
    job = document.get("job") or {}
    job_id, task = str(job.get("job_id", "?")), str(job.get("task", "?"))
    records = list(document.get("records") or ())
    replayer = Replayer(job_id, records, document.get("children") or {})

    def verdict(ok: bool, outcome: str, detail: str) -> Verdict:
        patches = {sk.removeprefix(PATCH): v for sk, v in replayer.patches.items()}
        return Verdict(job_id, task, ok, outcome, detail, patches)

    try:
        definition = registry.get(task)
    except ValidationError:
        return verdict(False, "unknown_task", f"the code has no task {task!r}")
    ctx = JobContext(job_id=job_id, task=task, tenant=str(job.get("tenant", "")),
                     attempt=int(job.get("attempts") or 1),
                     max_attempts=int(job.get("max_attempts") or 1), fencing_token=0,
                     idempotency_key=str(job.get("idempotency_key") or job_id),
                     deadline_ms=2**62, labels=job.get("labels") or {}, _durable=replayer,
                     _once=_no_once)
    try:
        definition.fn(task_input(definition.input, job.get("payload")), ctx)
        ctx._returned()
    except _Reached:
        pass
    except NonDeterministic as exc:
        return verdict(False, "non_deterministic", str(exc))
    except Exception as exc:
        return verdict(False, "raised", f"{type(exc).__name__}: {exc}")
    return verdict(True, "replays", f"{replayer.history.position} recorded call(s) match")


def document(app: Leasehold, job: Job) -> dict[str, Any]:
    """The job's history document (``GET /jobs/{id}/history``): the job, its records in
    order, its children's states. Open callbacks' tokens are left out (the document is
    meant for files and CI logs; ``GET /jobs/{id}/steps`` shows them)."""
    steps = [{k: v for k, v in step.items() if k != "token"}
             for step in job_records(app, job.job_id)]
    ids = [str(step["job_id"]) for step in steps if step["kind"] == "child"
           and step.get("job_id")]
    found = [child for child in app.store.batch_get(ids) if child.tenant == job.tenant] \
        if ids else []
    return {"job": job.view(), "records": steps,
            "children": {child.job_id: summary(child) for child in found}}


def parse_lines(text: str) -> list[dict[str, Any]]:
    """``leasehold export-histories``'s output: one history document a line."""
    documents = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            document = json.loads(line)
        except ValueError as exc:
            raise ValidationError("file", f"line {number} is not JSON: {exc}") from None
        if not isinstance(document, dict) or not isinstance(document.get("job"), dict):
            raise ValidationError("file", f"line {number} is not a history document "
                                  "({\"job\": ..., \"records\": [...]})")
        documents.append(document)
    return documents
