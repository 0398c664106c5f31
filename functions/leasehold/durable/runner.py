"""What ``ctx.step``, ``ctx.sleep``, ``ctx.callback``, ``ctx.spawn`` and ``ctx.wait_for`` do
in one attempt of a durable job (the provider :mod:`leasehold.core.context` delegates to).

The replay model: a resumed job's handler is called again from the top; every durable call
finds what an earlier execution stored and returns it without doing the work again. So a
handler must make the same durable calls in the same order on every execution (names are
the keys; sleeps and unnamed spawns are numbered in their order), and keep everything that
is not deterministic inside a step. :mod:`.history` checks that order on every call: a call
that does not match the record at its place stops the attempt (``NonDeterministic``);
``ctx.patched`` branches new code from old without breaking it.
"""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Callable, Mapping, Sequence
from contextlib import ExitStack
from typing import Any

from leasehold.core.context import JobContext
from leasehold.core.jobs import Job
from leasehold.core.spec import MAX_DELAY_SECONDS, encode_json
from leasehold.core.states import JobState
from leasehold.core.suspension import (
    CallbackFailed,
    CallbackTimeout,
    DurableMisuse,
    Sleep,
    Suspend,
)
from leasehold.durable import patches, records, runs
from leasehold.durable.children import CHILD, CHILD_POLL_SECONDS, spawn_child, wait_checks
from leasehold.durable.history import PATCH, SEQ, History
from leasehold.errors import NotFound, PayloadTooLarge, ValidationError
from leasehold.lifecycle.app import Leasehold

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$")
#: The most a callback may wait: as long as a sleep (the ``due`` index and SQS hold both).
MAX_CALLBACK_SECONDS = MAX_DELAY_SECONDS


class Callback:
    """A callback made by ``ctx.callback``: give ``token`` to whoever completes it."""

    def __init__(self, runner: Runner, name: str, token: str, timeout_at: int) -> None:
        self._runner = runner
        self.name = name
        self.token = token
        self.timeout_at = timeout_at

    def wait(self) -> Any:
        """The value it was completed with. Suspends the job until then (``Suspend``, a
        BaseException: never catch it); raises :class:`CallbackTimeout` past its timeout
        and :class:`CallbackFailed` if it was failed."""
        return self._runner.wait_callback(self)


def token_of(job_id: str, secret: str, name: str) -> str:
    """``<job>:<secret>:<name>``: the job and the name find the record, the 128-bit random
    secret makes it unguessable (job ids are neither secret nor random when keyed)."""
    return f"{job_id}:{secret}:{name}"


def outcome(record: Mapping[str, Any]) -> Any:
    """A settled callback's value, or its error raised."""
    kind = record.get("outcome")
    if kind == "completed":
        return json.loads(record.get("value", "null"))
    if kind == "failed":
        raise CallbackFailed(f"callback {record.get('name')!r} failed: {record.get('error')}",
                             name=record.get("name"))
    raise CallbackTimeout(f"callback {record.get('name')!r} was not completed before its "
                          "timeout", name=record.get("name"))


class Runner:
    def __init__(self, app: Leasehold, job: Job, owner: str, ctx: JobContext) -> None:
        self.app = app
        self.job = job
        self.owner = owner
        self.ctx = ctx
        self._records: dict[str, dict[str, Any]] | None = None
        self._used: set[str] = set()
        self._sleeps = 0
        self._spawns: dict[str, int] = {}
        self._history: History | None = None
        #: ``ctx.patched``'s answers in this execution (a second call answers the same).
        self._patches: dict[str, bool] = {}

    # -- bookkeeping ----------------------------------------------------------------------

    @property
    def stored(self) -> dict[str, dict[str, Any]]:
        if self._records is None:  # read once per attempt, at the first durable call
            self._records = records.load(self.app, self.job.job_id)
        return self._records

    @property
    def history(self) -> History:
        if self._history is None:
            self._history = History(self.job.job_id, self.stored)
        return self._history

    def _take(self, sk: str) -> int:
        """This call's place in the history, checked (see :mod:`.history`)."""
        record = self.stored.get(sk)
        return self.history.take(sk, legacy=record is not None and record.get(SEQ) is None)

    def _claim(self, sk: str, what: str, name: str) -> None:
        if not isinstance(name, str) or not _NAME.match(name):
            raise DurableMisuse(f"{what} name {name!r} must be 1-128 of A-Z a-z 0-9 _ . : -")
        if sk in self._used:
            raise DurableMisuse(f"{what} name {name!r} is used twice in one execution: each "
                                f"{what} needs a name of its own")
        self._used.add(sk)

    def _store(self, sk: str, attributes: Mapping[str, Any],
               effects: Sequence[Mapping[str, Any]] = (), where: str = "") -> dict[str, Any]:
        kept = sum(1 for key in self.stored if not key.startswith(CHILD))  # children: own bound
        if sk not in self.stored and kept >= records.MAX_RECORDS:
            raise DurableMisuse(f"a job keeps at most {records.MAX_RECORDS} steps, sleeps "
                                "and callbacks; split the work into child jobs")
        record = records.put_fenced(self.app, self.job, self.owner, sk, attributes, effects,
                                    where)
        self.stored[sk] = record
        return record

    # -- steps ----------------------------------------------------------------------------

    def step(self, name: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        sk = "step#" + str(name)
        self._claim(sk, "step", name)
        place = self._take(sk)
        record = self.stored.get(sk)
        if record is None:
            # What fn adds with ctx.transact commits with its stored result, in the same
            # fenced transaction: a replay that returns the result has them applied, once.
            with self.ctx._effects_apart() as effects, ExitStack() as scopes:
                for scope in self.app.step_scopes:  # e.g. a step span (leasehold.tracing)
                    scopes.enter_context(scope(self.app, self.job, name))
                value = fn(*args, **kwargs)  # raises: nothing stored, the attempt fails
            try:
                text = encode_json(f"step {name!r} result", value, records.MAX_STEP_BYTES)
            except (PayloadTooLarge, ValidationError) as exc:
                raise DurableMisuse(f"{exc} (store large results elsewhere and return "
                                    "their key)") from None
            record = self._store(sk, {"kind": "step", "name": name, "result": text,
                                      "at": self.app.now(), "attempt": self.job.attempt,
                                      SEQ: place},
                                 effects, f"step {name!r}")
        return json.loads(record["result"])

    # -- sleeps ---------------------------------------------------------------------------

    def sleep_for(self, seconds: float) -> None:
        if isinstance(seconds, bool) or not isinstance(seconds, int | float) or \
                not 0 <= seconds <= MAX_DELAY_SECONDS:
            raise DurableMisuse(f"ctx.sleep takes 0 to {MAX_DELAY_SECONDS} seconds")
        self._sleep(lambda now: now + int(seconds * 1000))

    def sleep_until(self, when_ms: int) -> None:
        self._sleep(lambda now: when_ms)

    def _sleep(self, wake_at: Callable[[int], int]) -> None:
        self._sleeps += 1
        sk = f"sleep#{self._sleeps}"
        self._used.add(sk)
        place = self._take(sk)
        record = self.stored.get(sk)
        now = self.app.now()
        if record is None:
            until = wake_at(now)
            if until > now + MAX_DELAY_SECONDS * 1000:
                raise DurableMisuse("a durable sleep lasts at most 366 days")
            # Recorded first: the resumed execution that reaches this call again must know
            # it already slept, and until when (it does not recompute "now + seconds").
            record = self._store(sk, {"kind": "sleep", "until": until, "at": now, SEQ: place})
        until = int(record["until"])
        if now < until:
            raise Suspend(Sleep(wake_at=until, waiting="sleep"))

    # -- callbacks ------------------------------------------------------------------------

    def callback(self, name: str, timeout_seconds: float) -> Callback:
        sk = "cb#" + str(name)
        self._claim(sk, "callback", name)
        if isinstance(timeout_seconds, bool) or not isinstance(timeout_seconds, int | float) \
                or not 1 <= timeout_seconds <= MAX_CALLBACK_SECONDS:
            raise DurableMisuse(f"timeout_seconds must be 1 to {MAX_CALLBACK_SECONDS}")
        place = self._take(sk)
        record = self.stored.get(sk)
        run, now = runs.current(self.job), self.app.now()
        if record is None:
            record = self._store(sk, {
                "kind": "callback", "name": name, "tenant": self.job.tenant,
                "secret": secrets.token_hex(16), "at": now,
                "timeout_at": now + int(timeout_seconds * 1000), runs.RECORD_RUN: run,
                SEQ: place})
        elif runs.rearmable(record, run):
            # The job was re-run by hand since this callback timed out, failed or was left
            # waiting: it waits again, as long as it asks now (its token stays).
            record = records.rearm_fenced(self.app, self.job, self.owner, sk, run,
                                          now + int(timeout_seconds * 1000), now)
            self.stored[sk] = record
        return Callback(self, name, token_of(self.job.job_id, record["secret"], name),
                        int(record["timeout_at"]))

    def wait_callback(self, callback: Callback) -> Any:
        sk = "cb#" + callback.name
        record = records.get(self.app, self.job.job_id, sk) or self.stored[sk]
        if record.get("outcome"):
            return outcome(record)
        if self.app.now() >= callback.timeout_at:
            # Time is up. The outcome is written once, whoever is first: a completion that
            # lands at the same moment makes this write fail, and then it is the outcome.
            settled = records.update_fenced(
                self.app, self.job, self.owner, sk,
                {"outcome": "timed_out", "settled_at": self.app.now()},
                "attribute_not_exists(outcome)")
            return outcome(settled or records.get(self.app, self.job.job_id, sk) or {})
        # Sleep until the timeout, unless it is completed before the sleep is written (the
        # check below is part of that write): then the job runs again at once.
        check = {"ConditionCheck": {
            "TableName": self.app.settings.coordination_table,
            "Key": {"pk": {"S": records.partition(self.job.job_id)}, "sk": {"S": sk}},
            "ConditionExpression": "attribute_not_exists(outcome)"}}
        raise Suspend(Sleep(wake_at=callback.timeout_at, waiting="callback:" + callback.name,
                            also=(check,)))

    # -- children -------------------------------------------------------------------------

    def spawn(self, name: str, task: str, payload: Any, options: Mapping[str, Any]) -> str:
        if not name:
            count = self._spawns.get(task, 0) + 1
            self._spawns[task] = count
            name = f"{task}.{count}"
        self._claim(CHILD + name, "spawn", name)
        place = self._take(CHILD + name)
        return spawn_child(self.app, self.job, self.owner, self.stored, name, task, payload,
                           options, seq=place)

    def wait_for(self, job_ids: Sequence[str]) -> list[dict[str, Any]]:
        ids = list(dict.fromkeys(job_ids))
        found = {job.job_id: job for job in self.app.store.batch_get(ids)} if ids else {}
        missing = [i for i in ids if i not in found or found[i].tenant != self.job.tenant]
        if missing:
            raise NotFound(f"no job {missing[0]}", job_id=missing[0])
        live = [found[i] for i in ids if found[i].state.live]
        if not live:
            return [summary(found[i]) for i in job_ids]
        # Woken when a child finishes (an observer); the check makes a child that finished
        # since the read above wake the job at once; the poll bounds what a lost wake-up
        # (a process that died before its observer ran) can cost.
        now = self.app.now()
        raise Suspend(Sleep(wake_at=now + CHILD_POLL_SECONDS * 1000, waiting="children",
                            also=wait_checks(self.app, live)))


    # -- patches (see .history) ----------------------------------------------------------

    def patched(self, change: str) -> bool:
        sk = PATCH + str(change)
        if sk in self._patches:
            return self._patches[sk]
        if not isinstance(change, str) or not _NAME.match(change):
            raise DurableMisuse(f"patch id {change!r} must be 1-128 of A-Z a-z 0-9 _ . : -")
        answer = self.history.patched(sk)
        if answer is None:  # past the history's end: the new code's branch, for good
            place = self._take(sk)
            self._store(sk, {"kind": "patch", "name": change, "at": self.app.now(),
                             SEQ: place})
            answer = True
        self._patches[sk] = answer
        self._used.add(sk)
        patches.note(self.app, change)  # for GET /jobs?patch= (see .patches)
        return answer

    def deprecate_patch(self, change: str) -> None:
        if not isinstance(change, str) or not _NAME.match(change):
            raise DurableMisuse(f"patch id {change!r} must be 1-128 of A-Z a-z 0-9 _ . : -")
        self.history.deprecated(PATCH + change)

    def finished(self) -> None:
        # A handler that made no durable call read no history: checking it would cost every
        # job a read (see .history).
        if self._records is not None:
            self.history.finished()


def summary(job: Job) -> dict[str, Any]:
    error = None if job.error is None else {"type": job.error.type,
                                            "message": job.error.message}
    return {"job_id": job.job_id, "state": job.state.value,
            "result": job.result if job.state is JobState.SUCCEEDED else None, "error": error}


def install_runner(app: Leasehold) -> Callable[[JobContext, Job, str], None]:
    """The attempt hook that gives each attempt's context its durable provider."""

    def hook(ctx: JobContext, job: Job, owner: str) -> None:
        ctx._durable = Runner(app, job, owner, ctx)

    return hook
