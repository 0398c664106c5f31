"""The state machine's rules for the front door's batch API and trace headers (issue 44).

* ``POST /jobs/batch``: a caller sends a few jobs in one request with an
  ``Idempotency-Key``, on a tenant whose plan gives it room (:data:`BATCH_TENANT`); an item
  that failed (a 5xx under the machine's faults) or an answer that was lost is sent again
  with the same key, as a caller does. Each item answered 201 or 200 names a job whose row
  holds that item's task and payload, and the batch sent again answers every item with the
  same job (made once).
* Trace headers: a request (the batch, or ``POST /jobs`` alone) carries a W3C
  ``traceparent``; the job keeps it (its row's trace names the caller's trace), and every
  span that names the job, its submit span and its runs, is in the caller's trace (until a
  retry by hand, which is a request of its own).

The jobs join the machine's (``jobs``): every other rule and check meets them.
"""

from __future__ import annotations

import itertools
from typing import Any

from hypothesis import event
from hypothesis import strategies as st
from hypothesis.stateful import invariant, rule

from leasehold.api.context import ApiConfig
from leasehold.tenancy.plans import set_plan
from leasehold.tracing.carrier import TRACE
from tests.integration.api_client import ApiClient
from tests.integration.stateful_fired import fire

#: The batch API's tenant: capped (its items are admitted in order), with room on its plan.
BATCH_TENANT = "lambda"
BATCH_CAP = 40
MAX_FAIL = 5


class ApiRules:
    """Mixed into the lifecycle machine; uses its ``app``, ``jobs``, ``keys``, ``manual_
    retries``, ``failed`` and :class:`~tests.integration.stateful_phantoms.PhantomRules`'
    ``span_exporter``."""

    app: Any
    jobs: list[str]
    keys: Any
    manual_retries: Any
    span_exporter: Any
    failed: tuple[type[BaseException], ...]

    def api_setup(self) -> None:
        set_plan(self.app, BATCH_TENANT, max_live=BATCH_CAP)
        self.front = ApiClient(self.app, ApiConfig(trust_tenant_header=True))
        self.trace_ids = itertools.count(1)
        #: Job -> the trace id (hex) of the request that made it.
        self.traced: dict[str, str] = {}
        self.trace_spans_read = 0

    def _traceparent(self) -> tuple[str, str]:
        n = next(self.trace_ids)
        trace_id = f"{0xa5 << 120 | n:032x}"
        return trace_id, f"00-{trace_id}-{n:016x}-01"


    @rule(fails=st.lists(st.integers(0, MAX_FAIL), min_size=1, max_size=4),
          traced=st.booleans(), alone=st.booleans())
    def submit_through_the_front_door(self, fails: list[int], traced: bool,
                                      alone: bool) -> None:
        """A batch (or, ``alone``, one ``POST /jobs``) with an ``Idempotency-Key`` and,
        ``traced``, a ``traceparent``; sent again with the same key until every item has
        its job (three tries), and once more to see each answered with the job it made."""
        key = f"api{next(self.keys)}"
        headers = {"Idempotency-Key": key}
        trace_id = None
        if traced:
            trace_id, headers["traceparent"] = self._traceparent()
        items = [{"task": "work", "payload": {"fail_first": f}} for f in fails[:1 if alone
                                                                                 else None]]
        made: dict[int, str] = {}
        for _ in range(3):
            answers = self._front_send(items, headers, alone)
            if answers is None:
                continue
            for index, status, job_id in answers:
                if status in (200, 201):
                    assert made.setdefault(index, job_id) == job_id, (index, made, job_id)
            if len(made) == len(items):
                break
        for index, job_id in made.items():
            if job_id not in self.jobs:
                self.jobs.append(job_id)
            row = self.app.store.get(job_id)
            assert (row.task, row.payload) == (items[index]["task"],
                                               items[index]["payload"]), row
            if trace_id is not None:
                stored = row.extra.get(TRACE)
                assert isinstance(stored, dict) and stored["tp"].split("-")[1] == trace_id, (
                    "the caller's trace not kept on its job", job_id, stored)
                self.traced[job_id] = trace_id
        if len(made) < len(items):
            event("a front-door submission left items unmade after three tries")
            return
        again = self._front_send(items, headers, alone)
        if again is None:
            return
        for index, status, job_id in again:
            assert (status, job_id) == (200, made[index]), (index, status, job_id, made)
        fire("a request sent again answers each item with the job it made (an item)",
             len(again))

    def _front_send(self, items: list[dict[str, Any]], headers: dict[str, str],
              alone: bool) -> list[tuple[int, int, str]] | None:
        """Each item's (index, status, job id or ''); None when the request failed whole."""
        if alone:
            reply = self.front.post("/jobs", items[0], tenant=BATCH_TENANT, headers=headers)
            if reply.status >= 500:
                return None
            assert reply.status in (200, 201, 429), reply
            return [(0, reply.status, reply.body.get("job_id", "") if reply.status < 300
                     else "")]
        reply = self.front.post("/jobs/batch", {"jobs": items}, tenant=BATCH_TENANT,
                                headers=headers)
        if reply.status >= 500:
            return None
        assert reply.status == 200, reply
        results = reply.body["results"]
        assert [r["index"] for r in results] == list(range(len(items))), results
        for r in results:
            assert r["status"] in (200, 201, 429) or r["status"] >= 500, r
        return [(r["index"], r["status"], (r.get("job") or {}).get("job_id", ""))
                for r in results]

    @invariant()
    def a_job_carries_its_callers_trace_into_its_row_and_spans(self) -> None:
        if not getattr(self, "traced", None):
            return
        checked = 0
        spans = self.span_exporter.get_finished_spans()
        new, self.trace_spans_read = spans[self.trace_spans_read:], len(spans)
        for span in new:  # each span once, when it ends
            job_id = (span.attributes or {}).get("leasehold.job_id")
            trace_id = self.traced.get(str(job_id))
            if trace_id is None or self.manual_retries[job_id]:
                continue
            if not span.name.startswith(("leasehold submit", "leasehold run")):
                continue
            assert f"{span.get_span_context().trace_id:032x}" == trace_id, (
                "a span out of its caller's trace", span.name, job_id)
            checked += 1
        fire("a job carries its caller's trace (a span of a traced job)", checked)
