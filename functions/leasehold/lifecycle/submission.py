"""Submitting a job: validate, write the row with one conditional put, hand it off.

An idempotent replay (the key's job exists) writes nothing, and hands the job off again if it
finds it queued, never leased, past a short grace: its first submission's put may have landed
while the caller saw an error, and then no message was sent.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from botocore.exceptions import ClientError

from leasehold.aws.dynamo import Cancelled, not_applied
from leasehold.core.flowcontrol import GATE, START_BY
from leasehold.core.holds import held
from leasehold.core.ids import derived_job_id, new_job_id
from leasehold.core.jobs import Job, Transition
from leasehold.core.retention import RETENTION_DAYS
from leasehold.core.spec import JobSpec, ResolvedSpec, resolve, targeted
from leasehold.core.states import JobState
from leasehold.errors import IdempotencyConflict, NotFound, Overloaded, RateLimited
from leasehold.lifecycle import handoff
from leasehold.lifecycle.app import Leasehold
from leasehold.lifecycle.store_base import ADMISSION_SHARD, COUNTED, DEADLINE, SLOT_AT

__all__ = ["ADMISSION_SHARD", "COUNTED", "DEADLINE", "PUT_WITHIN_MS", "REPLAY_GRACE_MS",
           "SLOT_AT", "Create", "Intake",
           "Submitted", "job_id_for", "new_job", "resend_at", "sends_first", "submit",
           "through_intakes"]

log = logging.getLogger(__name__)

#: How long a submission's slot may be old when its row is put (ms; see ``take`` below and
#: ``leasehold.tenancy.slots``, whose repair waits longer than this before it counts).
PUT_WITHIN_MS = 5_000

#: How long after a job was queued an idempotent replay that finds it never leased sends its
#: message again (the put's own caller sends within milliseconds of it landing).
REPLAY_GRACE_MS = 2_000


@dataclass(frozen=True)
class Submitted:
    job: Job
    #: False when an idempotent replay found the job the first submission made.
    created: bool
    #: A live job with the same unique key answered (``leasehold.flow.unique``).
    duplicate: bool = False
    #: Coalesced into a debounced job that carries it (``leasehold.flow.debounce``).
    coalesced: bool = False


#: Creates a row with the writes that must commit with it, hands it off, and answers.
Create = Callable[[Job, Sequence[Mapping[str, Any]]], Submitted]
#: A feature's part in a submission (``Leasehold.intakes``): given the spec, the row about
#: to be written and the writes to commit with it, call ``create`` (perhaps with a changed
#: row and more writes) or answer without it. Runs before anything is written, so a
#: ValidationError it raises costs nothing.
Intake = Callable[[Leasehold, JobSpec, Job, Sequence[Mapping[str, Any]], Create], Submitted]


def job_id_for(spec: ResolvedSpec, now: int, shards: int) -> str:
    # With an idempotency key the id *is* the key: one conditional put decides the race
    # between concurrent replays, so there is never an orphan row (and no transaction).
    if spec.idempotency_key is not None:
        return derived_job_id(spec.tenant, "job", spec.tenant, spec.idempotency_key)
    return new_job_id(now, spec.tenant, shards)


def new_job(app: Leasehold, spec: ResolvedSpec, now: int, *, job_id: str | None = None,
            state: JobState | None = None, actor: str = "api",
            extra: dict[str, Any] | None = None) -> Job:
    """The row for a new job: QUEUED if SQS can hold it until it is due, else SCHEDULED."""
    if state is None:
        state = JobState.QUEUED if handoff.within_sqs_delay(spec.run_at_ms, now) else \
            JobState.SCHEDULED
    queued = state is JobState.QUEUED
    if spec.gate is not None:  # flow control: the lease reads it (leasehold.flow)
        extra = {**(extra or {}), GATE: dict(spec.gate)}
    row = Job(
        job_id=job_id or job_id_for(spec, now, app.settings.tenant_shards),
        tenant=spec.tenant, task=spec.task,
        payload_json=spec.payload_json, pool=spec.pool, priority=spec.priority, state=state,
        epoch=1 if queued else 0, max_attempts=spec.max_attempts, retry=spec.retry,
        timeout_seconds=spec.timeout_seconds, labels=spec.labels,
        idempotency_key=spec.idempotency_key, spec_hash=spec.spec_hash, created_at=now,
        run_at=spec.run_at_ms,
        lease_expires_at=handoff.handoff_deadline(spec.run_at_ms, app.settings) if queued else None,
        history=(Transition(now, "", state.value, actor, "submitted"),),
        extra=(extra or {}) | ({} if spec.retention_days is None else
                               {RETENTION_DAYS: spec.retention_days})
        | ({DEADLINE: now + int(spec.deadline_seconds * 1000)}
           if spec.deadline_seconds is not None else {}),
    )
    stamped: dict[str, Any] = {}
    for stamp in app.stamps:  # e.g. the trace the job continues (leasehold.tracing)
        stamped.update(stamp(app, row))
    return replace(row, extra={**row.extra, **stamped}) if stamped else row


def submit(app: Leasehold, spec: JobSpec, *, counted: bool | None = None, shard: int = 0,
           also: Sequence[Mapping[str, Any]] = (), internal: bool = False,
           handoffs: list[handoff.Pending] | None = None,
           take: Callable[[Job], tuple[Job, Callable[[], None]]] | None = None
           ) -> Submitted:
    """Validate, write and hand off a job.

    ``counted``: the job holds one of its tenant's live-job slots, taken by the admission
    write in ``also`` (committed with the row, or not at all); the slot is given back when
    the job finishes. False: admitted for a tenant without a cap (no slot; a cap set later
    counts it in); None: not admitted (a library call). Internal submissions are not
    counted. ``shard``: the tenant's admission item the slot was taken from, recorded on
    the row so it is given back there.
    ``internal``: Leasehold submits one of its own tasks (refused otherwise).
    ``handoffs``: hold the hand-off here instead of sending it (a batch sends its items'
    together, :func:`handoff.send_all`); the row is the outbox either way. A row that sends
    first still does, with the items written beside it (:class:`handoff.Gather`).
    ``take``: takes the job's slot by its own write just before the row is put (after every
    intake, so a submission that is refused, coalesced or answered by a duplicate takes
    none) and returns the row that records it (``SLOT_AT``) and how to give the slot back,
    called when no row of ours was put: a replay, a transaction refused, a slot older than
    :data:`PUT_WITHIN_MS` at the put. An error that leaves the put's fate unknown keeps it
    (the repair of ``leasehold.tenancy.slots`` returns it if no row came). Refused at the
    cap (:class:`RateLimited`), a keyed submission whose job exists is answered as the
    replay it is.
    """
    now = app.now()
    spec = targeted(spec, app.registry)  # a job with no code, as its built-in task's spec
    resolved = resolve(spec, app.registry, pools=app.settings.pools,
                       timeout_limits=app.settings.job_timeout_limits(), now_ms=now,
                       internal=internal)
    extra: dict[str, Any] | None = None
    if counted is not None:
        extra = {COUNTED: counted, **({ADMISSION_SHARD: shard} if counted and shard else {})}

    def create(row: Job, writes: Sequence[Mapping[str, Any]]) -> Submitted:
        undo: Callable[[], None] = _nothing
        if take is not None:
            try:
                row, undo = take(row)  # the slot first: a live counted row always has one
            except RateLimited:
                existing = _existing(app, row)
                if existing is None:
                    raise
                return answer(existing, False, False)
        # Send first (issue 46): the message names the row before it exists, so the row
        # needs no ``sweep`` entry. A failed send makes the row the outbox instead.
        # Not for jobs whose lost worker must be taken over by the sweeper at its lease's
        # end rather than at the queue's visibility timeout (300 s): Leasehold's own (the
        # bulk actions run long from checkpoints), and a remote worker's, whose protocol
        # promises that (docs/protocol.md); nor a capped one (``sends_first``).
        first = not internal and row.pool not in app.settings.external_tasks and \
            sends_first(row, writes) and \
            handoff.send_first(app.queues, row, now, held=handoffs is not None)
        if SLOT_AT in row.extra and app.now() - int(row.extra[SLOT_AT]) > PUT_WITHIN_MS:
            # The repair may count a slot this old as orphaned before a put lands: give it
            # back and put nothing (a message sent first finds no row and is dropped).
            undo()
            raise Overloaded(f"job {row.job_id} was not created in time after its slot; "
                             "try again", retry_after=1)
        try:
            job, created = app.store.create(row, also=writes, swept=not first)
        except Cancelled:
            undo()  # a companion refused it: nothing was written
            raise
        except ClientError as exc:
            if not_applied(exc):
                undo()  # refused (a throttle past the retries): nothing was written
            elif first:
                _resend_if_slow(app, row, now)
            raise  # its fate unknown: the slot stays (the repair returns it if no row came)
        except Exception:
            if first:  # the put may have landed late: a worker may have dropped the message
                _resend_if_slow(app, row, now)
            raise
        if not created:
            undo()  # a replay: the slot is the first submission's row's, not ours
        if first and created:
            _resend_if_slow(app, job, now)
        return answer(job, created, bool(first))

    def answer(job: Job, created: bool, first: bool) -> Submitted:
        if not created and (job.spec_hash != resolved.spec_hash or
                            job.tenant != resolved.tenant):
            raise IdempotencyConflict(
                f"idempotency key {resolved.idempotency_key!r} was used for another job spec",
                job_id=job.job_id,
            )
        # Created (also when our put's response was lost: the store recognised its row), it
        # is handed off now. A replay hands it off again only if it is queued and never
        # leased: the first submission's put may have landed while its caller saw an error
        # past botocore's retries (a 500), and then nothing sent the message. A duplicate is
        # harmless (the lease is fenced by the epoch, the first one wins).
        # Sent first, the message went out already (never for a replay: it has no key).
        due = None if first else 0 if created else resend_at(job, now)
        if due is not None and not created:
            log.info("replay of %s found it queued and never leased: handed off again",
                     job.job_id)
        if due is not None and handoffs is not None:
            handoffs.append(handoff.Pending(job, now, due))
        elif due is not None:
            handoff.send(app.queues, job, now, not_before=due)
        return Submitted(job, created=created)

    return through_intakes(app, spec, create)(new_job(app, resolved, now, extra=extra), also)


def _nothing() -> None:
    pass


def _existing(app: Leasehold, row: Job) -> Job | None:
    """A keyed submission's job, if its key's row exists (a replay refused at the cap)."""
    if row.idempotency_key is None:
        return None
    try:
        return app.store.get(row.job_id)
    except NotFound:
        return None


def sends_first(row: Job, writes: Sequence[Mapping[str, Any]]) -> bool:
    """Whether a new row's message goes out before it is put, so the row needs no ``sweep``
    entry: a QUEUED row with nothing the sweeper must watch besides a lost worker (no start
    window or deadline it would end it at, no hold), put alone (an admission transaction
    that refuses would leave a message for nothing, one per refusal), holding none of its
    tenant's slots, and without an idempotency key (a keyed replay sends only for a row it
    finds queued and never leased, :func:`resend_at`: it cannot know that before its put).

    A capped job (``COUNTED``, what the API's default cap makes) keeps its ``sweep`` entry:
    a lost worker's job is taken over by the sweeper once its lease ends, as the worker
    protocol promises, not when SQS's visibility timeout (300 s) brings its message back.
    That entry is the one index write of the capped path (issue 46, part 3)."""
    return row.state is JobState.QUEUED and not writes and not held(row.extra) and \
        not row.extra.get(COUNTED) and row.idempotency_key is None and \
        START_BY not in row.extra and DEADLINE not in row.extra


def _resend_if_slow(app: Leasehold, job: Job, sent_at: int) -> None:
    """Send again when the put ended more than :data:`handoff.RESEND_AFTER_MS` after the
    first message: a worker that met that message before the row may drop it once it is
    :data:`handoff.ORPHAN_GRACE_MS` old. A duplicate is fenced by the epoch."""
    now = app.now()
    if now - sent_at > handoff.RESEND_AFTER_MS:
        log.info("the put of %s took %d ms: handed off again", job.job_id, now - sent_at)
        handoff.send(app.queues, job, now)


def through_intakes(app: Leasehold, spec: JobSpec, create: Create) -> Create:
    """``create``, behind every intake of ``app`` (the first installed runs first)."""
    chain = create
    for intake in reversed(app.intakes):
        chain = _through(app, spec, intake, chain)
    return chain


def _through(app: Leasehold, spec: JobSpec, intake: Intake, then: Create) -> Create:
    return lambda row, writes: intake(app, spec, row, writes, then)


def resend_at(job: Job, now: int) -> int | None:
    """When a replay's hand-off of ``job`` should be due, or None to send nothing.

    Only a QUEUED job never leased in this queueing (``attempt`` 0) is sent again. Queued
    :data:`REPLAY_GRACE_MS` ago or more, its message is due at once. Within the grace the
    submission that queued it may still be sending, so the replay's message is due when the
    grace ends: a replay that raced the first send costs one fenced duplicate, and one that
    followed a 500 at once still starts the job within the grace, not at the sweeper's
    hand-off deadline."""
    if job.state is not JobState.QUEUED or job.attempt != 0:
        return None
    queued_at = job.history[-1].at if job.history else job.created_at
    return max(now, queued_at + REPLAY_GRACE_MS)
