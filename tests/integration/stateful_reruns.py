"""The state machine's chains for the mutants that survived it (issue 44): each builds, in
one step, the chain its bug needs, and checks what the product did on it.

* **A re-run by hand is its own run.** A debounce window that ran and died, re-run by hand,
  must not be joined again by the key's next submission (which would replace the payload the
  re-run was asked to run); a parent that died after its second spawn (whose end cancelled
  that child), re-run by hand, must get that child run again and succeed with its work (not
  be answered with the CANCELLED child).
* **A bulk action acts on what its request meant.** A job created after the request (and
  matching its filter) is left alone when the bulk job runs.
* **The local relay goes on past a record it cannot read.** A row no version can read, on
  the jobs table's stream, is set aside after its tries; the relay then
  reaches the end of the stream (the relay of ``leasehold dev``, ``streams.poller``, over
  the machine's emulated stream).

Each chain clears the fault weather for its own writes (what it exercises is the re-run, the
bound, the set-aside, not a lost response), and is met once in every example from the
machine's ``a_tenant_at_its_cap_with_dead_jobs`` initializer, and again as a swarm rule.
"""

from __future__ import annotations

import itertools
import tempfile
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from hypothesis import event
from hypothesis.stateful import rule

from leasehold.aws.definitions import job_key
from leasehold.aws.queues import Message
from leasehold.bulk.actions import ACTOR as BULK
from leasehold.core.context import JobContext
from leasehold.core.spec import JobSpec
from leasehold.core.states import JobState
from leasehold.durable.children import PARENT
from leasehold.events.publishing import FileSink
from leasehold.lifecycle import control
from leasehold.lifecycle.submission import submit
from leasehold.lifecycle.worker import Delivery, Worker
from leasehold.streams import poller
from leasehold.time import ticker
from tests.integration.stateful_fired import fire

RERUN_PARENT = "reruns.parent"
RERUN_KID = "reruns.kid"
#: Tenants of the bulk chain: a fresh one each time (its own jobs, its own cap).
BULK_CHAIN = "mu"
#: The id prefix of the rows the relay chain writes: no job's (no version can read them).
NOT_A_JOB = "not-a-job-"


class ReRunRules:
    """Mixed into the lifecycle machine; uses its ``app``, ``clock``, ``injector``,
    ``jobs``, ``latest`` and ``front`` (the API, ``stateful_api``)."""

    app: Any
    clock: Any
    injector: Any
    jobs: list[str]
    latest: dict[str, Any]
    front: Any

    def reruns_setup(self) -> None:
        self.rerun_ids = itertools.count()
        self.parent_runs: Counter[str] = Counter()
        self.kid_runs: Counter[tuple[str, int]] = Counter()
        self.relay_dir = tempfile.TemporaryDirectory(prefix="leasehold-relay-")
        registry = self.app.registry

        @registry.task(RERUN_PARENT, max_attempts=1)
        def parent(payload: Any, ctx: JobContext) -> Any:
            first = ctx.spawn(RERUN_KID, {"n": 1, "of": ctx.job_id}, name="one")
            [done] = ctx.wait_for([first])
            second = ctx.spawn(RERUN_KID, {"n": 2, "of": ctx.job_id}, name="two")
            self.parent_runs[ctx.job_id] += 1
            if self.parent_runs[ctx.job_id] == 1:
                raise RuntimeError("the first run fails after its second spawn")
            return [done["result"], *(r["result"] for r in ctx.wait_for([second]))]

        @registry.task(RERUN_KID, max_attempts=2)
        def kid(payload: Any, ctx: JobContext) -> Any:
            self.kid_runs[(payload["of"], payload["n"])] += 1
            return payload["n"] * 10

    def reruns_teardown(self) -> None:
        self.relay_dir.cleanup()

    @contextmanager
    def _clear_weather(self) -> Iterator[None]:
        weather = self.injector.faults[:]
        self.injector.faults.clear()
        try:
            yield
        finally:
            self.injector.faults[:] = weather

    def _follow(self, job_id: str) -> None:
        if job_id not in self.jobs:
            self.jobs.append(job_id)

    def _run(self, job_id: str) -> None:
        """Deliver the job's message now (its copy in the queue arrives later, fenced)."""
        job = self.app.store.get(job_id)
        if job.state is not JobState.QUEUED:
            return
        if job.run_at is not None and job.run_at > self.app.now():
            self.clock.advance((job.run_at - self.app.now()) / 1000)
        Worker(self.app).process(Delivery(Message(job_id, job.epoch).body()))

    def _settle(self, root: str) -> None:
        """Run ``root`` and its children until ``root`` ends (a bounded number of rounds)."""
        for _ in range(12):
            family = [root, *sorted(j.job_id for j in self.latest.values()
                                    if j.extra.get(PARENT) == root)]
            for job_id in family:
                self._follow(job_id)
                self._run(job_id)
            if self.app.store.get(root).state.terminal:
                return
            self.clock.advance(1)
            ticker.promote_due(self.app)

    # -- rules ----------------------------------------------------------------------------

    @rule()
    def a_debounce_window_is_re_run_by_hand(self) -> None:
        """A window runs and dies; re-run by hand, the key's next submission must open a
        window of its own: the re-run keeps the payload it was asked to run."""
        key = f"rr{next(self.rerun_ids)}"
        with self._clear_weather():
            window = submit(self.app, JobSpec(
                task="once", payload={"fail_first": 1, "n": "first"},
                debounce={"key": key, "seconds": 5})).job
            self._follow(window.job_id)
            self._run(window.job_id)
            if self.app.store.get(window.job_id).state is not JobState.DEAD:
                event("a debounce window did not die as planned")
                return
            control.retry(self.app, window.job_id)
            after = submit(self.app, JobSpec(
                task="work", payload={"fail_first": 0, "n": "second"},
                debounce={"key": key, "seconds": 5})).job
            self._follow(after.job_id)
        re_run = self.app.store.get(window.job_id)
        assert after.job_id != window.job_id and re_run.payload_json == window.payload_json, (
            "a debounce window re-run by hand was joined again", window, after, re_run)
        fire("a debounce window re-run by hand is not joined (a re-run)")

    @rule()
    def a_parent_is_re_run_after_its_end_cancelled_a_child(self) -> None:
        """A parent dies after its second spawn, whose child its end cancels; re-run by
        hand, it must get that child run again and succeed with both children's work."""
        with self._clear_weather():
            parent = submit(self.app, JobSpec(task=RERUN_PARENT, payload={})).job
            self._follow(parent.job_id)
            self._settle(parent.job_id)
            if self.app.store.get(parent.job_id).state is not JobState.DEAD:
                event("a re-run parent did not die as planned")
                return
            control.retry(self.app, parent.job_id)
            self._settle(parent.job_id)
            done = self.app.store.get(parent.job_id)
        assert done.state is JobState.SUCCEEDED and done.result == [10, 20] and \
            self.kid_runs[(parent.job_id, 2)] >= 1, (
                "a parent re-run by hand without its cancelled child's work", done,
                dict(self.kid_runs))
        fire("a parent re-run by hand runs its cancelled child again (a re-run)")

    @rule()
    def a_job_is_created_after_a_bulk_request(self) -> None:
        """``POST /jobs/bulk`` cancels a label's jobs; a job with that label created after the
        request, before the bulk job runs, is left alone."""
        n = next(self.rerun_ids)
        tenant, label = f"{BULK_CHAIN}{n}", {"chain": str(n)}
        with self._clear_weather():
            first = self.front.post("/jobs", {"task": "work", "payload": {"fail_first": 0},
                                              "labels": label}, tenant=tenant)
            assert first.status == 201, first
            self._follow(first.body["job_id"])
            reply = self.front.post("/jobs/bulk", {"action": "cancel",
                                                   "filter": {"label": [f"chain:{n}"]}},
                                    tenant=tenant)
            assert reply.status == 202, reply
            bulk_id = reply.body["bulk_id"]
            self._follow(bulk_id)
            self.clock.advance(1)
            late = self.front.post("/jobs", {"task": "work", "payload": {"fail_first": 0},
                                             "labels": label}, tenant=tenant)
            assert late.status == 201, late
            self._follow(late.body["job_id"])
            for _ in range(5):
                self._run(bulk_id)
                if self.app.store.get(bulk_id).state.terminal:
                    break
        late_job = self.app.store.get(late.body["job_id"])
        assert late_job.state is not JobState.CANCELLED and all(
            change.actor != BULK for change in late_job.history), (
                "a bulk action acted on a job created after its request", late_job)
        if self.app.store.get(first.body["job_id"]).state is JobState.CANCELLED:
            fire("a bulk action leaves a job created after its request (one it left)")

    @rule()
    def the_relay_meets_a_record_it_cannot_read(self) -> None:
        """A row no version can read is written (a record the relay cannot decode) and
        removed (a record after it): the relay sets the first aside after its tries and
        reaches the end of the stream. (No job is made here: a plain one has no sweep
        entry, which the sweep-index check does not know, and a keyed one meets the
        machine's faults on its hand-off.)"""
        streams = _MotoStreams.of(self.app)
        if streams is None:
            event("no emulated stream (DynamoDB Local)")
            return
        # A relay from here on (its checkpoint at the stream's last record): the records
        # before are other rules' (enqueued rows, whose hand-offs the enqueue rules model).
        n = next(self.rerun_ids)
        where = Path(self.relay_dir.name) / str(n)
        checkpoint = poller.Checkpoint(where / "relay.json")
        checkpoint.save({streams.shard_id(): streams.last_sequence_number()},
                        poller.stream_arn(self.app))
        reader = poller.StreamReader(self.app, FileSink(where / "events.jsonl"), checkpoint,
                                     client=streams)
        bad = {**job_key(f"{NOT_A_JOB}{n}"), "state": {"S": "QUEUED"}, "epoch": {"N": "1"}}
        table = self.app.settings.jobs_table
        with self._clear_weather():
            self.app.clients.dynamodb.put_item(TableName=table, Item=bad)
            self.app.clients.dynamodb.delete_item(TableName=table,
                                                  Key=job_key(bad["job_id"]["S"]))
            end = streams.last_sequence_number()
            for _ in range(4 * poller.TRIES):
                reader.step()
                if reader.positions.get(streams.shard_id()) == end:
                    break
        aside = _lines(reader.dead)
        assert reader.positions.get(streams.shard_id()) == end, (
            "the relay stopped at a record it cannot read", reader.positions, end, aside)
        fire("the relay goes on past a record it cannot read (one set aside)", aside)


def _lines(path: Path) -> int:
    return path.read_text().count("\n") if path.exists() else 0


class _MotoStreams:
    """The DynamoDB Streams calls the relay makes, answered by moto's backend of the jobs
    table's stream (the machine's moto mocks in process, where the streams API is not
    routed)."""

    def __init__(self, backend: Any, table: Any) -> None:
        self.backend, self.table = backend, table

    @classmethod
    def of(cls, app: Any) -> _MotoStreams | None:
        from moto.core import DEFAULT_ACCOUNT_ID
        from moto.dynamodb.models import dynamodb_backends
        from moto.dynamodbstreams.models import dynamodbstreams_backends

        region = app.settings.region
        table = dynamodb_backends[DEFAULT_ACCOUNT_ID][region].tables.get(
            app.settings.jobs_table)
        if table is None or getattr(table, "stream_shard", None) is None:
            return None
        return cls(dynamodbstreams_backends[DEFAULT_ACCOUNT_ID][region], table)

    def shard_id(self) -> str:
        return str(self.table.stream_shard.id)

    def last_sequence_number(self) -> str:
        return str(self.table.stream_shard.items[-1].to_json()["dynamodb"]["SequenceNumber"])

    def describe_stream(self, StreamArn: str) -> dict[str, Any]:
        return {"StreamDescription": self.backend.describe_stream(StreamArn)}

    def get_shard_iterator(self, StreamArn: str, ShardId: str,
                           ShardIteratorType: str,
                           SequenceNumber: str | None = None) -> dict[str, Any]:
        iterator = self.backend.get_shard_iterator(
            StreamArn, ShardId, ShardIteratorType,
            None if SequenceNumber is None else int(SequenceNumber))
        return {"ShardIterator": iterator.arn}

    def get_records(self, ShardIterator: str, Limit: int = 1000) -> dict[str, Any]:
        return dict(self.backend.get_records(ShardIterator, Limit))
