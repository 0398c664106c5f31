"""The state machine's rules and checks for issue 44's two defects.

* **Nothing names a job that never was.** An admission whose tenant's admission item fell
  behind (unknown to this process, as after ``leasehold dev`` restarts on its saved state)
  is refused and written again under a new id. The emulator's transaction undo left the
  refused row's INSERT on the jobs table's stream, so the relay published ``Job Queued`` for
  a job that does not exist; and an unkeyed submit span was ended before its write, so the
  refused row had a submit span too. The rule :meth:`PhantomRules.submit_on_a_stale_
  admission_item` makes that submission; the check reads every event the relay would
  publish from the stream (``streams.relay.events``, all of them, nothing handed off) and
  the submit spans reported (an in-memory exporter) as that rule's submission ends, and each
  must name a job that exists or existed; every step's submit spans are checked too (which
  found a try cancelled by transaction conflicts reported as a job of unknown outcome, and
  ``enqueue_item``'s span ended before the caller's own transaction ran: an order the
  business condition refused, ``place_an_order(taken=True)``, left a span; both fixed). The
  machine's moto undoes transactions as ``leasehold dev``'s emulator does
  (``local.dynamo_transactions``), so its stream is the one the relay reads there.
* **A tenant has one cap, however its jobs are made.** Each function read the cap from its
  own environment, so workers without the API's variable let an admitted parent under a
  cap run its children past it. The rule :meth:`PhantomRules.a_capped_parent_spawns_children`
  admits a parent on :data:`KAPPA` that spawns up to six children (``ctx.spawn``) and runs
  it at once; the check: no capped tenant has more live jobs than its cap, counting each
  admitted job and each child of one (a child admitted with no cap is not marked counted:
  it is still a live job of that tenant).

Both checks read what the product wrote (the stream, the spans, the rows), never the
product's own counters, and count ``never exceeded``, which holds however the counting
is done.
"""

from __future__ import annotations

import itertools
from collections import Counter
from typing import Any

from hypothesis import event
from hypothesis import strategies as st
from hypothesis.stateful import invariant, rule
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from leasehold.aws.definitions import job_key
from leasehold.aws.dynamo import from_av
from leasehold.aws.queues import Message
from leasehold.core.context import JobContext
from leasehold.core.jobs import Job
from leasehold.core.policy import RetryPolicy
from leasehold.core.spec import JobSpec
from leasehold.core.states import JobState
from leasehold.durable.children import PARENT
from leasehold.errors import RateLimited
from leasehold.lifecycle.submission import COUNTED
from leasehold.lifecycle.worker import Delivery, Worker
from leasehold.local import dynamo_transactions
from leasehold.streams.relay import changes, events
from leasehold.tenancy.admission import submit_admitted
from leasehold.tracing.spans import use_provider
from tests.integration.helpers import submit_on_a_stale_admission_item
from tests.integration.stateful_api import BATCH_TENANT
from tests.integration.stateful_fired import fire
from tests.integration.stateful_reruns import NOT_A_JOB

#: The capped tenant whose parents fan out (the machine's cap: its settings).
KAPPA = "kappa"
FANOUT = "phantoms.fanout"
KID = "phantoms.kid"
#: A child task with a ``unique`` default: a second parent's spawn of it while the first's
#: is live is answered by that one (the spawn goes through the submission intakes).
UNIQUE_KID = "phantoms.unique_kid"
#: Tenants whose admission item a rule made stale: one fresh tenant each (the stale item
#: replaces the tenant's item, counters and all).
STALE = "theta"
MAX_CHILDREN = 6


class PhantomRules:
    """Mixed into the lifecycle machine; uses its ``app``, ``inspect``, ``injector``,
    ``jobs``, ``latest``, ``deleted``, ``keys``, ``limits``, ``failed`` and ``table_items``."""

    app: Any
    inspect: Any
    injector: Any
    jobs: list[str]
    latest: dict[str, Job]
    deleted: dict[str, Job]
    keys: Any
    limits: Any
    failed: tuple[type[BaseException], ...]
    table_items: Any

    def phantoms_setup(self) -> None:
        # Transactions undone item by item, as `leasehold dev`'s emulator does (the stream
        # is put back with them): the stream the relay reads there.
        dynamo_transactions.install()
        self.span_exporter = InMemorySpanExporter()
        self.span_provider = TracerProvider()
        self.span_provider.add_span_processor(SimpleSpanProcessor(self.span_exporter))
        self.submit_spans: list[ReadableSpan] = []
        self.submit_spans_read = 0
        self.span_provider.add_span_processor(_Submits(self.submit_spans))
        use_provider(self.span_provider)
        self.stale_tenants = itertools.count()
        self.stream_read = 0
        registry = self.app.registry

        @registry.task(FANOUT, max_attempts=2,
                       retry=RetryPolicy(min_backoff_seconds=0, max_backoff_seconds=0.3))
        def fanout(payload: Any, ctx: JobContext) -> Any:
            kids = [ctx.spawn(UNIQUE_KID, {"n": 0}, name="u0")] if payload.get("unique") \
                else []
            kids += [ctx.spawn(KID, {"n": i}, name=f"k{i}") for i in range(payload["n"])]
            return [r["result"] for r in ctx.wait_for(kids)]

        def kid(payload: Any, ctx: JobContext) -> Any:
            return payload["n"]

        registry.task(KID, max_attempts=2)(kid)
        registry.task(UNIQUE_KID, max_attempts=2, unique={"key": "kid{payload.n}"})(kid)
        self.app.store.observers.append(self._phantoms_observe)

    def _phantoms_observe(self, job: Job, source: JobState | None) -> None:
        if job.task in (KID, UNIQUE_KID) and job.job_id not in self.jobs:
            self.jobs.append(job.job_id)  # a fan-out parent's child

    def phantoms_teardown(self) -> None:
        use_provider(None)
        self.span_provider.shutdown()

    # -- rules ----------------------------------------------------------------------------

    @rule(fail_first=st.integers(0, 1))
    def submit_on_a_stale_admission_item(self, fail_first: int) -> None:
        """A capped submission (no idempotency key) whose tenant's admission item fell
        behind: refused once, and written again under a new id. The write itself meets no
        fault: what it exercises is the refusal and the retry."""
        tenant = f"{STALE}{next(self.stale_tenants)}"
        spec = JobSpec(task="work", payload={"fail_first": fail_first}, tenant=tenant)
        weather = self.injector.faults[:]
        self.injector.faults.clear()
        before = len(self.span_exporter.get_finished_spans())
        try:
            made = submit_on_a_stale_admission_item(self.app, tenant, spec, self.inspect)
        finally:
            self.injector.faults[:] = weather
        self.jobs.append(made.job.job_id)
        submits = [span for span in self.span_exporter.get_finished_spans()[before:]
                   if span.name.startswith("leasehold submit")]
        for span in submits:
            job_id = str((span.attributes or {}).get("leasehold.job_id"))
            assert self._existed(job_id), ("a submit span for a job that never existed",
                                           span.name, job_id)
        fire("every submit span names a job that exists or existed", len(submits))

    @rule(n=st.integers(0, MAX_CHILDREN), unique=st.booleans())
    def a_capped_parent_spawns_children(self, n: int, unique: bool = False) -> None:
        """A parent admitted under :data:`KAPPA`'s cap spawns ``n`` children (and first,
        ``unique``, one of a task with a unique default), and runs now (its message arrives
        later as a duplicate, fenced by its epoch): the children take slots under the same
        cap, and past it the parent sleeps until one frees."""
        spec = JobSpec(task=FANOUT, payload={"n": n, "unique": unique}, tenant=KAPPA,
                       idempotency_key=f"f{next(self.keys)}")
        for _ in range(3):
            try:
                job = submit_admitted(self.app, spec, "default", self.limits).job
                break
            except RateLimited:
                event("a fan-out parent refused: its tenant at its cap")
                return
            except self.failed:
                event("a fan-out submission failed: the caller retries with its key")
        else:
            return
        if job.job_id not in self.jobs:
            self.jobs.append(job.job_id)
        try:
            Worker(self.app).process(Delivery(Message(job.job_id, job.epoch).body()))
        except self.failed:
            event("a fan-out parent's run failed")
        self._one_live_unique_kid(list(self.latest.values()))

    # -- checks ---------------------------------------------------------------------------

    def _existed(self, job_id: str) -> bool:
        if job_id in self.latest or job_id in self.deleted:
            return True
        found = self.inspect.get_item(TableName=self.app.settings.jobs_table,
                                      Key=job_key(job_id), ConsistentRead=True)
        return "Item" in found

    def _stream_events(self) -> list[dict[str, Any]]:
        """The events the relay would publish (``all``) for the stream's new records, read
        from the emulator's stream shard (moto's in-process mock does not route the streams
        API); none on DynamoDB Local, whose stream is its own."""
        from moto.core import DEFAULT_ACCOUNT_ID
        from moto.dynamodb.models import dynamodb_backends

        tables = dynamodb_backends[DEFAULT_ACCOUNT_ID][self.app.settings.region].tables
        table = tables.get(self.app.settings.jobs_table)
        shard = getattr(table, "stream_shard", None)
        if shard is None:
            return []
        # The rows the relay chain writes on purpose (stateful_reruns.py) are no job rows:
        # the relay sets them aside; this check reads the jobs' records.
        records = [record.to_json() for record in shard.items[self.stream_read:]]
        records = [r for r in records if not r["dynamodb"]["Keys"]["job_id"]["S"].startswith(
            NOT_A_JOB)]
        self.stream_read = len(shard.items)
        return events(changes(records), "all", self.app.now())

    @invariant()
    def every_submit_span_names_a_job_that_exists_or_existed(self) -> None:
        """After every step, each submit span reported since the last: its job exists or
        existed, unless the span itself says its outcome is unknown (a write that failed past
        its retries, whose row may or may not have landed). A try cancelled by conflicts
        reported such a span for a job it certainly never made (found by this check after
        ``admit_through_conflicting_transactions``; tests/integration/test_tracing.py)."""
        if not hasattr(self, "span_exporter"):
            return
        fresh = self.submit_spans[self.submit_spans_read:]
        self.submit_spans_read += len(fresh)
        checked = 0
        for span in fresh:
            attributes = span.attributes or {}
            if attributes.get("leasehold.committed") == "unknown":
                continue
            job_id = str(attributes.get("leasehold.job_id"))
            assert self._existed(job_id), ("a submit span for a job that never existed",
                                           span.name, job_id)
            checked += 1
        fire("every submit span of every step names a job that exists or existed", checked)

    @invariant()
    def every_event_names_a_job_that_exists_or_existed(self) -> None:
        if not hasattr(self, "span_exporter"):
            return
        named = [e["detail"]["job_id"] for e in self._stream_events()]
        for job_id in named:
            assert self._existed(job_id), ("an event for a job that never existed", job_id)
        fire("every event names a job that exists or existed", len(named))

    @invariant()
    def no_capped_tenant_has_more_live_jobs_than_its_cap_children_included(self) -> None:
        """Every live job of a tenant that was admitted (counted) or spawned by one that
        was, from the rows as they are: never more than the tenant's cap."""
        if not hasattr(self, "span_exporter"):
            return
        rows = [from_av(raw) for raw in self.table_items(self.app.settings.jobs_table)
                if "state" in raw and "tenant" in raw]
        counted = {row["job_id"] for row in rows if row.get(COUNTED)}
        live: Counter[str] = Counter()
        children = 0
        for row in rows:
            if not JobState(row["state"]).live:
                continue
            if row.get(COUNTED) or row.get(PARENT) in counted:
                live[row["tenant"]] += 1
                children += row.get(PARENT) in counted
        cap = self.limits.max_live
        for tenant, count in live.items():
            if tenant in ("default", BATCH_TENANT) or tenant.startswith(STALE):
                continue  # the library's tenant has no cap; the others' are their own
            assert count <= cap, ("more live jobs than the cap", tenant, count, cap)
        fire("no tenant above its cap, children included (a live child of a counted job)",
             children)

    def _one_live_unique_kid(self, jobs: list[Job]) -> None:
        """Right after a fan-out parent ran (its children are QUEUED until delivered)."""
        unique = Counter(job.tenant for job in jobs
                         if job.task == UNIQUE_KID and job.state.live)
        assert all(count <= 1 for count in unique.values()), (
            "two live children with one unique key", unique)
        fire("one live job per unique key (a live unique kid of a fan-out)", sum(unique.values()))


class _Submits(SpanProcessor):
    """Keeps each ``leasehold submit`` span as it ends, so the check reads only new ones."""

    def __init__(self, into: list[ReadableSpan]) -> None:
        self.into = into

    def on_end(self, span: ReadableSpan) -> None:
        if span.name.startswith("leasehold submit"):
            self.into.append(span)
