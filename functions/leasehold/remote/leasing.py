"""``POST /workers/lease``: up to ``max_jobs`` of a pool's jobs, leased to a remote worker.

The polling worker's receive does the polling (its priority order, its long poll of every
queue at once, its pause check), and the in-process worker's ``take`` does the lease: a
remote worker gets exactly the jobs, in exactly the order, with exactly the flow control a
Python worker of the pool would. A leased job's message stays in flight (its receipt is in
the token; heartbeats keep it invisible, the finish deletes it), as a Python worker keeps
it: SQS fair queues count it as its tenant's. A message that starts nothing (stale, parked,
cancelled) is deleted at once, as a Python worker acknowledges it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass

from botocore.exceptions import BotoCoreError, ClientError

from leasehold.aws.queues import Message, Received
from leasehold.core.jobs import Job
from leasehold.core.states import JobState
from leasehold.errors import LeaseLost, NotFound, StaleMessage, ValidationError
from leasehold.lifecycle import fleet, handoff
from leasehold.lifecycle.app import Leasehold
from leasehold.lifecycle.store import Change
from leasehold.lifecycle.worker import Delivery, Worker
from leasehold.polling.poller import PollerOptions, PollingWorker, fair_order
from leasehold.remote.hangup import Gone
from leasehold.remote.tokens import Token
from leasehold.settings import PRIORITIES

log = logging.getLogger(__name__)

#: The longest long poll (SQS's ``WaitTimeSeconds``, and below API Gateway's 29 s).
MAX_WAIT_SECONDS = 20
MAX_JOBS = 10
#: Pause between rounds that leased nothing but found messages (of other tasks, parked).
IDLE_ROUND_SECONDS = 0.2
#: How often a long poll looks whether its caller hung up.
GONE_CHECK_SECONDS = 0.2
#: Tries to hand a job back through errors botocore gave up on.
HAND_BACK_TRIES = 3


@dataclass(frozen=True)
class Leased:
    job: Job
    #: The lease's token (:class:`~leasehold.remote.tokens.Token`, encoded): every
    #: heartbeat and finish must carry it.
    token: str


def lease(app: Leasehold, *, pool: str, tasks: Sequence[str] | None, max_jobs: int,
          wait_seconds: float, worker_id: str, gone: Gone | None = None) -> list[Leased]:
    """Lease jobs of ``pool`` (of ``tasks`` only, if given), waiting up to ``wait_seconds``
    for the first; an empty list when none came. ``gone`` says whether the caller hung up
    (:mod:`leasehold.remote.hangup`): the wait ends, and what was leased is handed back."""
    leased = _lease(app, pool=pool, tasks=tasks, max_jobs=max_jobs,
                    wait_seconds=wait_seconds, worker_id=worker_id, gone=gone)
    if leased and gone is not None and gone():
        for item in leased:
            hand_back(app, item, worker_id)
        return []
    try:  # seen: GET /workers lists it; never a reason to fail the lease
        fleet.leased_by(app, worker_id=worker_id, pool=pool,
                        jobs=[item.job.job_id for item in leased],
                        interval_seconds=max(wait_seconds, app.settings.lease_seconds))
    except Exception:
        log.info("could not record remote worker %s", worker_id, exc_info=True)
    return leased


def _lease(app: Leasehold, *, pool: str, tasks: Sequence[str] | None, max_jobs: int,
           wait_seconds: float, worker_id: str, gone: Gone | None) -> list[Leased]:
    if pool not in app.settings.pools:
        raise ValidationError("pool", f"unknown pool {pool!r}")
    if pool not in app.settings.external_tasks:
        # Its jobs are Python tasks, run by the pool's own workers: a remote worker that
        # leased one could only fail it (and would take it from the worker that runs it).
        raise ValidationError("pool", f"pool {pool!r} runs Python workers: only an external "
                                      "pool (PoolConfig(kind='external'), leasehold dev "
                                      "--external) can be leased")
    wanted = set(tasks) if tasks else None
    poller = PollingWorker(app, PollerOptions(
        pool=pool, batch_size=max_jobs, wait_seconds=max(1, int(wait_seconds))),
        worker=Worker(app, worker_id=worker_id))
    ends = time.monotonic() + wait_seconds
    timer = threading.Thread(target=_watch, args=(poller, ends, gone), daemon=True,
                             name=f"lease-wait-{worker_id}")
    timer.start()
    skipped = 0
    try:
        while True:
            leased: list[Leased] = []
            unwanted = 0
            if not poller.pause.paused():
                batch = poller.receive()
                if not batch and wait_seconds > 0:
                    batch = poller.listen()  # returns empty once the timer stops it
                leased, unwanted = _take(app, poller.worker, fair_order(batch, {}), wanted)
                if not leased and unwanted and batch:
                    # Only other workers' tasks on that queue: ask the others first.
                    poller.skip(batch[0].queue_url, IDLE_ROUND_SECONDS * 5)
                    skipped += 1
                    if skipped < len(PRIORITIES):
                        continue
            if leased or time.monotonic() >= ends or poller.stopping.is_set():
                return leased
            skipped = 0
            poller.stopping.wait(IDLE_ROUND_SECONDS)
    finally:
        poller.stop()  # ends the watch too
        poller.hang_up()


def _watch(poller: PollingWorker, ends: float, gone: Gone | None) -> None:
    """Stop the poller's wait at ``ends``, or as soon as the caller hangs up."""
    while not poller.stopping.is_set():
        left = ends - time.monotonic()
        if left <= 0 or (gone is not None and gone()):
            poller.stop()
            return
        poller.stopping.wait(min(left, GONE_CHECK_SECONDS) if gone is not None else left)


def hand_back(app: Leasehold, item: Leased, worker_id: str) -> None:
    """Give back a job leased to a caller that hung up before the answer: QUEUED again at
    once under a new epoch (its old message is stale, a new one sent), the attempt not
    counted and no crash recorded, its slot given back with the change; nothing ran."""
    job, token = item.job, Token.decode(item.token, item.job.job_id)
    now = app.now()
    first = job.attempt <= 1
    change = Change(
        target=JobState.QUEUED, actor=worker_id, owner=token.owner, bump_epoch=True,
        reason="handed back: the worker hung up before the lease's answer",
        increment={"attempt": -1},
        set={"run_at": now, "lease_expires_at": handoff.handoff_deadline(now, app.settings)},
        remove=("lease_owner", "started_at", *(("first_started_at",) if first else ())))
    for tries in range(1, HAND_BACK_TRIES + 1):
        try:
            # Each try writes the same change at the same now: one whose answer was lost is
            # recognised by the next (the store's own-write check).
            new = app.store.transition(job, change, now=now, conflict=LeaseLost)
            break
        except LeaseLost:
            return  # taken over meanwhile: nothing of ours to give back
        except (ClientError, BotoCoreError):
            if tries == HAND_BACK_TRIES:
                # Left RUNNING: its lease runs out and the sweeper takes it over (a crash).
                log.warning("could not hand back %s", job.job_id, exc_info=True)
                return
    handoff.send(app.queues, new, now)
    url = token.queue_of(app, job.pool)
    if url is not None:
        try:
            app.queues.delete(url, [token.receipt_handle])
        except Exception:  # it shows again later, and its stale epoch starts nothing
            log.info("could not delete the old message of %s", job.job_id, exc_info=True)


def _take(app: Leasehold, worker: Worker, batch: Sequence[Received],
          wanted: set[str] | None) -> tuple[list[Leased], int]:
    """The jobs leased from ``batch``, and how many messages were for other tasks."""
    leased: list[Leased] = []
    done: list[Received] = []
    others: list[Received] = []
    for received in batch:
        if wanted is not None and not _of(app, received, wanted):
            others.append(received)
            continue
        try:
            taken = worker.take(Delivery(received.body, received.queue_url,
                                         received.receipt_handle))
        except Exception:
            # Left invisible: it comes back after its visibility timeout (a lease that did
            # land meanwhile is fenced, and the sweeper takes it over when it expires).
            log.warning("could not lease %s", received.message_id, exc_info=True)
            continue
        if isinstance(taken, tuple):
            job, owner = taken
            leased.append(Leased(job, Token(owner, received.queue_url,
                                            received.receipt_handle).encode()))
        else:
            done.append(received)
    for url in {m.queue_url for m in done}:
        app.queues.delete(url, [m.receipt_handle for m in done if m.queue_url == url])
    for url in {m.queue_url for m in others}:
        # Another worker's tasks: visible again at once, for a worker that runs them.
        app.queues.extend_all(url, [m.receipt_handle for m in others if m.queue_url == url], 0)
    return leased, len(others)


def _of(app: Leasehold, received: Received, wanted: set[str]) -> bool:
    """Whether the message's job is one of ``wanted`` (a stale message counts: taking it
    acknowledges it)."""
    try:
        return app.store.get(Message.parse(received.body).job_id).task in wanted
    except (StaleMessage, NotFound):
        return True


__all__ = ["MAX_JOBS", "MAX_WAIT_SECONDS", "Leased", "hand_back", "lease"]
