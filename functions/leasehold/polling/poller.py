"""The long-running polling worker (ECS pools and the local runtime): Lambda's SQS event
source, by hand.

One poller thread feeds ``concurrency`` runner threads. While busy it short-polls one of the
pool's three queues at a time, chosen by a smooth weighted round-robin (high 6 : normal 3 :
low 1 by default): ``high`` is asked first most often, but every queue is asked first at its
share of polls, so a flood of ``high`` jobs slows ``low`` down without ever starving it. A
queue a short poll found empty is skipped for ``skip_empty_seconds`` (0.25 s): work on one
priority costs one receive per batch. Once a round of short polls finds every queue empty,
the worker is idle: it long-polls all three queues at once (``WaitTimeSeconds``, one request
per queue per ``wait_seconds``), and the first batch to arrive on any of them starts at once
and makes the worker busy again. An idle worker costs three receives per ``wait_seconds``,
not several a second. A polled batch goes through
:func:`leasehold.lifecycle.consumer.consume`, exactly as Lambda would deliver it (partial
batch failures, successes deleted).

Within a batch, the tenants with the fewest jobs in flight on this worker go first
(:func:`fair_order`), as SQS fair queues prefer quiet message groups (the hand-off sends
each message with its tenant as ``MessageGroupId``): one tenant's flood does not make
another tenant's job wait behind it in the same batch.

Stopping (SIGTERM, Ctrl-C) stops polling and lets in-flight batches finish before exiting.
It never waits for a long poll: those run on daemon threads, and a batch one of them
receives after the stop is made visible again at once. A long poll receives with a short
visibility (:data:`LISTEN_VISIBILITY_SECONDS`), extended to the full one when its batch is
taken to run, so a process that dies while its long poll waits (the server still hands that
poll the next message) hides that message for seconds, not a visibility timeout.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field, replace

from leasehold.aws.queues import Message, Received
from leasehold.flow.pools import PauseView
from leasehold.lifecycle import fleet
from leasehold.lifecycle.app import Leasehold
from leasehold.lifecycle.consumer import consume
from leasehold.lifecycle.worker import Worker
from leasehold.polling import fairness
from leasehold.polling.priorities import DEFAULT_WEIGHTS, PriorityPicker
from leasehold.polling.task_protection import TaskProtection
from leasehold.settings import PRIORITIES

log = logging.getLogger(__name__)

#: A long poll receives for this long only; the batch gets the full visibility when it is
#: taken to run. A process that dies while its long poll waits (the server does not know)
#: would otherwise hide what that poll still receives for a whole visibility timeout.
LISTEN_VISIBILITY_SECONDS = 2


def fair_order(batch: Sequence[Received], in_flight: Mapping[str, int]) -> list[Received]:
    """The batch with the least busy tenants first, in the order an SQS fair queue hands
    messages out (a message's group is its tenant): each tenant's messages keep their order."""
    return fairness.fair_order(batch, lambda message: message.group, in_flight)


def _tenant(message: Received) -> str:
    return message.group or f"message:{message.message_id}"


@dataclass(kw_only=True)
class PollerOptions:
    pool: str = "default"
    concurrency: int = 4
    batch_size: int = 5
    heartbeat_seconds: float = 5.0
    #: Longest pause between polls of empty queues (the pause doubles up to it); used
    #: only when long polls are off (``wait_seconds`` 0).
    idle_seconds: float = 0.5
    #: An idle worker's long poll (SQS ``WaitTimeSeconds``, at most 20).
    wait_seconds: int = 20
    #: An idle worker's registry heartbeat, when nothing changed since the last one (the
    #: item says so, and the fleet view counts it stale after three of them). 30 s: an idle
    #: worker writes twice a minute (10 s made two workers 0.2 PutItem/s; issue 32), and a
    #: killed idle worker leaves the console's list within 90 s.
    idle_heartbeat_seconds: float = 30.0
    weights: Mapping[str, int] = field(default_factory=lambda: dict(DEFAULT_WEIGHTS))
    #: While busy, a queue a short poll found empty is not asked again for this long (its
    #: next message waits at most this much longer): a pool whose work is all on one
    #: priority pays one receive per batch, not two or three (issue 21).
    skip_empty_seconds: float = 0.25


class PollingWorker:
    def __init__(self, app: Leasehold, options: PollerOptions, *,
                 worker: Worker | None = None,
                 protection: TaskProtection | None = None) -> None:
        self.app = app
        self.options = options
        self.worker = worker or Worker(app)
        #: On ECS: protects the task from scale-in while jobs are in flight.
        self.protection = protection
        self.picker = PriorityPicker(options.weights)
        self.stopping = threading.Event()
        self._current: dict[int, list[str]] = {}
        #: Messages in flight on this worker (received, not yet deleted), by tenant.
        self.tenants_in_flight: Counter[str] = Counter()
        self._processed = 0
        self._lock = threading.Lock()
        #: When each queue a short poll found empty may be asked again (monotonic seconds).
        self._empty_until: dict[str, float] = {}
        #: The idle worker's outstanding long polls, by priority.
        self._listening: dict[str, Future[list[Received]]] = {}
        #: What the registry was last told: (jobs in flight, processed, interval).
        self._told: tuple[tuple[str, ...], int, float] | None = None
        self._last_beat = 0.0
        #: A paused pool's queues are not received from (leasehold.flow.pools).
        self.pause = PauseView(app, options.pool)
        self.info = fleet.WorkerInfo(worker_id=self.worker.worker_id, pool=options.pool,
                                     started_at=app.now(),
                                     heartbeat_seconds=options.heartbeat_seconds)

    # -- polling --------------------------------------------------------------------------

    def receive(self) -> list[Received]:
        """One batch from the first non-empty queue in picker order (empty if all are),
        skipping queues found empty within ``skip_empty_seconds`` (all of them: none
        skipped)."""
        now = time.monotonic()
        order = self.picker.order()
        asked = [p for p in order if self._empty_until.get(p, 0.0) <= now] or order
        for priority in asked:
            url = self.app.queues.url(self.options.pool, priority)
            batch = self.app.queues.receive(
                url, max_messages=self.options.batch_size,
                visibility_seconds=self._visibility())
            if batch:
                self._empty_until.pop(priority, None)
                return batch
            self._empty_until[priority] = now + self.options.skip_empty_seconds
        return []

    def skip(self, queue_url: str, seconds: float) -> None:
        """Do not short-poll this queue for ``seconds`` (its messages are not for us)."""
        for priority in PRIORITIES:
            if self.app.queues.url(self.options.pool, priority) == queue_url:
                self._empty_until[priority] = time.monotonic() + seconds

    def _visibility(self) -> int:
        return int(max(30, self.app.settings.lease_seconds * 2))

    def _long_poll(self, priority: str) -> Future[list[Received]]:
        """Start one long poll on a daemon thread (never joined: stop must not wait for it)."""
        future: Future[list[Received]] = Future()
        url = self.app.queues.url(self.options.pool, priority)

        def listen() -> None:
            try:
                batch = self.app.queues.receive(
                    url, max_messages=self.options.batch_size,
                    wait_seconds=min(20, max(1, int(self.options.wait_seconds))),
                    visibility_seconds=LISTEN_VISIBILITY_SECONDS)
            except Exception as exc:
                future.set_exception(exc)
                return
            if batch and self.stopping.is_set():
                self._give_back(batch)  # nobody will run it: let another worker have it now
                batch = []
            future.set_result(batch)

        threading.Thread(target=listen, name=f"listen-{priority}", daemon=True).start()
        return future

    def _give_back(self, batch: list[Received]) -> None:
        self._set_visibility(batch, 0, "could not give back %d message(s); they return "
                                       "after their visibility timeout")

    def _set_visibility(self, batch: list[Received], seconds: int, failed: str) -> None:
        """Set a received batch's visibility; a failure is logged (``failed`` takes the
        batch's size), never raised: the messages then keep the visibility they had."""
        if not batch:
            return
        try:
            self.app.queues.extend_all(batch[0].queue_url, [m.receipt_handle for m in batch],
                                       seconds)
        except Exception:
            log.warning(failed, len(batch), exc_info=True)

    def _take_listened(self) -> list[Received]:
        """A batch a finished long poll brought, in priority order (empty if none has)."""
        for priority in list(self._listening):
            future = self._listening[priority]
            if not future.done():
                continue
            del self._listening[priority]
            try:
                batch = future.result()
            except Exception:
                log.exception("long poll on %s failed", priority)
                self.stopping.wait(1.0)  # queue unreachable: do not spin
                continue
            if batch:
                self._hold(batch)
                return batch
        return []

    def _hold(self, batch: list[Received]) -> None:
        """A long poll's batch is ours now: the full visibility, as a short poll gives.
        If that fails it runs anyway: should it show again meanwhile, its lease is fenced by
        the epoch."""
        self._set_visibility(batch, self._visibility(),
                             "could not extend a long-polled batch of %d")

    def listen(self) -> list[Received]:
        """Idle: long-poll every queue at once; the first batch to arrive (empty on stop).

        A queue that already has a long poll outstanding is not asked again, so an idle
        worker makes one receive per queue per ``wait_seconds``. Batches that arrive on
        other queues meanwhile are kept for the next calls (their messages are received).
        """
        while not self.stopping.is_set():
            batch = self._take_listened()
            if batch:
                return batch
            for priority in PRIORITIES:
                if priority not in self._listening:
                    self._listening[priority] = self._long_poll(priority)
            wait(list(self._listening.values()), timeout=0.2, return_when=FIRST_COMPLETED)
        return []

    def poll_once(self) -> int:
        """Receive one batch and consume it on this thread. Returns its size."""
        batch = self.receive()
        if batch:
            self._run(batch)
        return len(batch)

    def _run(self, batch: list[Received]) -> None:
        me = threading.get_ident()
        with self._lock:
            batch = fair_order(batch, self.tenants_in_flight)
            self.tenants_in_flight.update(_tenant(m) for m in batch)
            self._current[me] = [_job_id(m.body) for m in batch]
        if self.protection is not None:
            self.protection.busy()  # before the first job starts: scale-in must not stop it
        try:
            consume(self.worker, batch)
        except Exception:
            # Unprocessed messages stay in SQS and come back after their visibility timeout.
            log.exception("a batch failed")
        finally:
            with self._lock:
                self.tenants_in_flight.subtract(_tenant(m) for m in batch)
                self.tenants_in_flight += Counter()  # drop tenants at zero
                self._current.pop(me, None)
                self._processed += len(batch)

    def _poll_loop(self, slots: threading.Semaphore, pool: ThreadPoolExecutor,
                   running: set[Future[None]]) -> None:
        # One poller feeds `concurrency` runners, as Lambda's event source pollers feed
        # concurrent invocations: an idle worker costs three long polls, not one per thread.
        pause = 0.05
        idle = False
        while not self.stopping.is_set():
            if not slots.acquire(timeout=0.2):
                continue  # every runner is busy
            if self.pause.paused():  # the pool is paused: its messages wait in SQS
                slots.release()
                self.stopping.wait(0.5)
                continue
            try:
                # A batch a long poll already received comes first: its messages are ours.
                batch = self._take_listened()
                if not batch and not idle:
                    batch = self.receive()
                    idle = not batch and self.options.wait_seconds > 0
                elif not batch:
                    batch = self.listen()
            except Exception:
                log.exception("poll failed")  # queue unreachable: back off and try again
                batch = []
            if not batch:
                slots.release()
                if self.options.wait_seconds <= 0:
                    self.stopping.wait(pause)
                    pause = min(self.options.idle_seconds, pause * 2)
                continue
            pause = 0.05
            idle = False
            future = pool.submit(self._run, batch)
            running.add(future)

            def finished(done: Future[None]) -> None:
                running.discard(done)
                slots.release()

            future.add_done_callback(finished)
        self.hang_up()

    def hang_up(self) -> None:
        """Stopped: batches that outstanding long polls bring, that nobody will run, go back
        to their queues (visible again at once) when they arrive."""
        for listening in self._listening.values():
            listening.add_done_callback(self._give_back_when_done)
        self._listening.clear()

    def _give_back_when_done(self, done: Future[list[Received]]) -> None:
        if done.exception() is None:
            self._give_back(done.result())

    # -- registry -------------------------------------------------------------------------

    def current_jobs(self) -> list[str]:
        """The jobs running on this worker now, each until its own outcome is written (not
        its batch's: a finished job must not show as running behind a slow one)."""
        return sorted(self.worker.running)

    def beat(self) -> None:
        with self._lock:
            processed = self._processed
            busy = bool(self._current)
        if self.protection is not None:
            # Renews a long protection, or drops it once idle (not after every batch: a busy
            # worker between two batches would flap).
            if busy:
                self.protection.busy()
            else:
                self.protection.idle()
        jobs = tuple(self.current_jobs())
        # Idle (nothing running, nothing changed since the last beat): the registry item
        # promises the next beat within the idle interval, so readers' staleness rule
        # (three missed beats) stays right while an idle fleet writes a few times a minute.
        quiet = not busy and self._told is not None and self._told[:2] == (jobs, processed)
        interval = max(self.options.heartbeat_seconds, self.options.idle_heartbeat_seconds) \
            if quiet else self.options.heartbeat_seconds
        info = replace(self.info, heartbeat_seconds=interval)
        fleet.heartbeat(self.app, info, current_jobs=jobs, processed=processed)
        self._told = (jobs, processed, interval)
        self._last_beat = time.monotonic()

    def beat_due(self) -> bool:
        """Whether the registry needs a beat now: something changed, or the promise runs out."""
        told = self._told
        if told is None:
            return True
        with self._lock:
            processed = self._processed
        if (tuple(self.current_jobs()), processed) != told[:2]:
            return True
        # Renew a promise once it is due (a busy worker's one every heartbeat).
        return time.monotonic() - self._last_beat >= told[2] - \
            self.options.heartbeat_seconds / 2

    def _beat_loop(self) -> None:
        while not self.stopping.wait(self.options.heartbeat_seconds):
            try:
                if self.beat_due():
                    self.beat()
            except Exception:
                log.warning("worker heartbeat failed", exc_info=True)

    # -- lifecycle ------------------------------------------------------------------------

    def run(self, *, drain_seconds: float = 30.0) -> None:
        """Poll until :meth:`stop`; then finish in-flight batches and deregister.

        A batch still running after ``drain_seconds`` is abandoned: its leases expire and
        the sweeper hands its jobs to another worker.
        """
        self.beat()
        slots = threading.Semaphore(self.options.concurrency)
        running: set[Future[None]] = set()
        pool = ThreadPoolExecutor(self.options.concurrency, thread_name_prefix="run")
        poller = threading.Thread(target=self._poll_loop, args=(slots, pool, running),
                                  name="poll", daemon=True)
        beats = threading.Thread(target=self._beat_loop, name="heartbeat", daemon=True)
        poller.start()
        beats.start()
        self.stopping.wait()
        poller.join()
        _, late = wait(set(running), timeout=drain_seconds)
        if late:
            log.warning("abandoning jobs still running after %ss: %s", drain_seconds,
                        ", ".join(self.current_jobs()))
        pool.shutdown(wait=False, cancel_futures=True)
        try:
            fleet.deregister(self.app, self.worker.worker_id)
        except Exception:
            log.warning("could not deregister %s", self.worker.worker_id, exc_info=True)

    def stop(self) -> None:
        self.stopping.set()


def _job_id(body: str) -> str:
    try:
        return Message.parse(body).job_id
    except Exception:
        return "?"


__all__ = ["PollerOptions", "PollingWorker", "PriorityPicker", "fair_order"]
