"""The polling worker prefers tenants with fewer jobs in flight, as SQS fair queues do."""

from __future__ import annotations

from collections import Counter
from types import SimpleNamespace
from typing import Any

import pytest

from leasehold.aws.queues import Received
from leasehold.polling import poller
from leasehold.polling.poller import PollerOptions, PollingWorker, fair_order


def _message(tenant: str | None, n: int) -> Received:
    return Received("url", f"receipt-{tenant}-{n}", f"id-{tenant}-{n}",
                    f'{{"job_id":"{tenant}-{n}","epoch":1}}', 1, tenant)


def _tenants(batch: list[Received]) -> list[str | None]:
    return [m.group for m in batch]


def test_a_quiet_tenant_goes_before_one_that_floods() -> None:
    batch = [_message("flood", 1), _message("flood", 2), _message("quiet", 1),
             _message("flood", 3), _message("quiet", 2)]
    ordered = fair_order(batch, {"flood": 8})
    assert _tenants(ordered) == ["quiet", "quiet", "flood", "flood", "flood"]
    assert [m.message_id for m in ordered if m.group == "flood"] == [
        "id-flood-1", "id-flood-2", "id-flood-3"]  # each tenant keeps its order


def test_equally_busy_tenants_alternate() -> None:
    batch = [_message("a", 1), _message("a", 2), _message("a", 3), _message("b", 1),
             _message("b", 2)]
    assert _tenants(fair_order(batch, {})) == ["a", "b", "a", "b", "a"]


def test_the_polling_worker_runs_its_batch_least_busy_tenant_first(
        monkeypatch: pytest.MonkeyPatch) -> None:
    app: Any = SimpleNamespace(now=lambda: 0)
    worker: Any = SimpleNamespace(worker_id="w-1")
    polling = PollingWorker(app, PollerOptions(), worker=worker)
    # Another runner thread of this worker holds eight of the flooding tenant's jobs.
    polling.tenants_in_flight.update({"flood": 8})
    consumed: list[tuple[list[str | None], Counter[str]]] = []

    def consume(_: Any, batch: list[Received]) -> None:
        consumed.append((_tenants(batch), Counter(polling.tenants_in_flight)))

    monkeypatch.setattr(poller, "consume", consume)
    polling._run([_message("flood", 9), _message("quiet", 1)])
    (order, during), = consumed
    assert order == ["quiet", "flood"]
    assert during == {"flood": 9, "quiet": 1}  # counted while in flight
    assert polling.tenants_in_flight == {"flood": 8}  # and released after
