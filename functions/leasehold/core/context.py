"""What a task handler sees while it runs."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from leasehold.core.suspension import Durable
from leasehold.errors import NonRetryableError

#: The kinds of entry ``ctx.transact`` takes (boto3 client ``TransactWriteItems`` shape).
TRANSACT_ACTIONS = ("Put", "Update", "Delete", "ConditionCheck")
#: DynamoDB's limits per transaction, less what Leasehold's own finish writes may take (the
#: job row, the tenant slot and outcome count, a concurrency slot, and headroom).
LEASEHOLD_ENTRIES = 5
MAX_EFFECTS = 100 - LEASEHOLD_ENTRIES
MAX_EFFECT_BYTES = 4 * 1024 * 1024 - 512 * 1024


@dataclass(kw_only=True)
class JobContext:
    job_id: str
    task: str
    tenant: str
    attempt: int
    max_attempts: int
    #: The job's epoch: strictly grows with each hand-off. Pass it to systems that can refuse
    #: writes from an older token, so a zombie worker cannot clobber a newer one.
    fencing_token: int
    #: Stable across attempts of the same job: use it to make side effects idempotent.
    idempotency_key: str
    #: When this attempt times out, as UTC epoch milliseconds.
    deadline_ms: int
    labels: Mapping[str, str] = field(default_factory=dict)
    #: Other features' data for the handler (a workflow step's dependency results, ...).
    extra: Mapping[str, Any] = field(default_factory=dict)
    _cancelled: threading.Event = field(default_factory=threading.Event, repr=False)
    _cancel_reason: str = ""
    _heartbeat: Callable[[Any], None] | None = field(default=None, repr=False)
    #: Durable execution (steps, sleeps, callbacks, children), installed per attempt by
    #: ``leasehold.durable`` through the app's attempt hooks.
    _durable: Durable | None = field(default=None, repr=False)
    #: Entries ``transact`` added: written by the transaction that records this attempt's
    #: success, and only if it does.
    _effects: list[dict[str, Any]] = field(default_factory=list, repr=False)
    _effect_bytes: int = field(default=0, repr=False)
    #: How ``once`` records a result (installed by ``leasehold.streams.once``).
    _once: Callable[[str, Callable[[], Any]], Any] | None = field(default=None, repr=False)
    #: What a feature equips an attempt with for Leasehold's own tasks (name -> object;
    #: ``leasehold.targets`` puts its deployment's HTTP and AWS callers here).
    _services: dict[str, Any] = field(default_factory=dict, repr=False)

    def once(self, name: str, fn: Callable[[], Any]) -> Any:
        """Run ``fn`` (an effect that cannot join ``transact``, such as an external API call)
        at most once to completion per (job, ``name``): its JSON result is recorded with this
        attempt's fencing token, and a later attempt gets the recorded result back instead of
        running it again. Pass ``fencing_token`` to the external system so that it can refuse
        a zombie that runs ``fn`` concurrently."""
        if self._once is None:
            return fn()
        return self._once(name, fn)

    def transact(self, items: list[dict[str, Any]]) -> None:
        """Write ``items`` (``TransactWriteItems`` entries: Put, Update, Delete or
        ConditionCheck on the application's tables) in the transaction that records this
        attempt's success: they commit exactly when this attempt finishes the job, never for
        a zombie's, a cancelled or a failed attempt. Inside ``ctx.step``, they commit with
        the step's stored result instead (one transaction, fenced by the lease), so a replay
        that returns the stored result has them applied once. Over DynamoDB's limits (100
        entries and 4 MB per transaction, less Leasehold's own; per step inside a step) or
        malformed: NonRetryableError, before anything is written. An entry whose condition
        fails fails the attempt with ``EffectRefused``, which names it."""
        size = self._effect_bytes
        for item in items:
            if (not isinstance(item, Mapping) or len(item) != 1
                    or next(iter(item)) not in TRANSACT_ACTIONS
                    or not isinstance(next(iter(item.values())), Mapping)
                    or not isinstance(next(iter(item.values())).get("TableName"), str)):
                raise NonRetryableError(
                    f"ctx.transact: {item!r:.200} is not one of {', '.join(TRANSACT_ACTIONS)} "
                    "with a TableName (boto3 client TransactWriteItems shape)")
            size += len(json.dumps(item, default=str))
        if len(self._effects) + len(items) > MAX_EFFECTS:
            raise NonRetryableError(
                f"ctx.transact: {len(self._effects) + len(items)} entries; one transaction (the "
                f"job's success, or a durable step's result) takes at most {MAX_EFFECTS} "
                "(DynamoDB's 100 less Leasehold's)")
        if size > MAX_EFFECT_BYTES:
            raise NonRetryableError(
                f"ctx.transact: {size} bytes of entries; at most {MAX_EFFECT_BYTES} "
                "(DynamoDB's 4 MB per transaction less Leasehold's share)")
        self._effects.extend(dict(item) for item in items)
        self._effect_bytes = size

    @contextmanager
    def _effects_apart(self) -> Iterator[list[dict[str, Any]]]:
        """The entries ``transact`` adds within this block, kept apart from the attempt's
        and within limits of their own: a durable step's, which commit with its record."""
        outer, outer_bytes = self._effects, self._effect_bytes
        self._effects, self._effect_bytes = [], 0
        try:
            yield self._effects
        finally:
            self._effects, self._effect_bytes = outer, outer_bytes

    @property
    def cancelled(self) -> bool:
        """True once the job was cancelled, its lease lost, or its attempt timed out."""
        return self._cancelled.is_set()

    @property
    def cancel_reason(self) -> str:
        return self._cancel_reason

    def wait_cancelled(self, timeout: float) -> bool:
        """Sleep up to ``timeout`` seconds, waking early (True) if the job is cancelled."""
        return self._cancelled.wait(timeout)

    def heartbeat(self, progress: Any = None) -> None:
        """Extend the lease now and record ``progress`` (any JSON value) on the job."""
        if self._heartbeat is not None:
            self._heartbeat(progress)

    def cancel(self, reason: str) -> None:
        if not self._cancelled.is_set():
            self._cancel_reason = reason
            self._cancelled.set()

    # -- durable execution (see leasehold.durable and docs/design.md) ----------------------

    @property
    def durable(self) -> Durable:
        if self._durable is None:
            raise RuntimeError("durable execution is not installed: build the app with "
                               "leasehold.compose.compose()")
        return self._durable

    def step(self, name: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Run ``fn(*args, **kwargs)`` once per job and keep its JSON result under ``name``;
        a later attempt or a resume gets the kept result without running ``fn``."""
        return self.durable.step(name, fn, *args, **kwargs)

    def sleep(self, seconds: float) -> None:
        """End this attempt without failing; the job runs again (from the top, its steps
        kept) ``seconds`` from now. Raises ``Suspend`` (a BaseException): never catch it."""
        self.durable.sleep_for(seconds)

    def sleep_until(self, when: datetime | int) -> None:
        """As :meth:`sleep`, until ``when`` (an aware datetime or UTC epoch ms)."""
        when_ms = when if isinstance(when, int) else int(when.timestamp() * 1000)
        self.durable.sleep_until(when_ms)

    def callback(self, name: str, *, timeout_seconds: float) -> Any:
        """A callback another system completes (``POST /callbacks/{token}``); its token is
        stable across replays. ``cb.wait()`` returns the value it was completed with."""
        return self.durable.callback(name, timeout_seconds)

    def spawn(self, task: str, payload: Any = None, *, name: str | None = None,
              **options: Any) -> str:
        """Start a child job once per call site (``name``, by default the task and the
        order of spawns in this execution) and return its id."""
        return self.durable.spawn(name or "", task, payload, options)

    def wait_for(self, job_ids: Sequence[str]) -> list[dict[str, Any]]:
        """Suspend until every job in ``job_ids`` is finished; their states, results and
        errors, in order."""
        return self.durable.wait_for(job_ids)

    def patched(self, change: str) -> bool:
        """Whether this execution takes the new code of change ``change``: True when it
        reaches this point on code that has the patch (recorded, so its replays answer the
        same), False when its history was recorded before the patch (it went on past this
        point on the old code): keep the old branch for it. See docs/design.md."""
        return self.durable.patched(change)

    def deprecate_patch(self, change: str) -> None:
        """Once no live job needs the old branch of ``change`` (``GET /jobs?patch=``): keep
        only the new code, and this call in place of ``patched``, so histories that
        recorded the patch still replay."""
        self.durable.deprecate_patch(change)

    def _returned(self) -> None:
        """The handler returned: durable execution checks that it read its whole history."""
        if self._durable is not None:
            self._durable.finished()
