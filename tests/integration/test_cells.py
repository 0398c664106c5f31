"""Cells with a home Region (issue 48): the Region lease fences a cell, submissions go to
the tenant's home (421 elsewhere), failover and failback. Faults hit only the control
table's calls, at the botocore layer, against the real emulators."""

from __future__ import annotations

import json
import urllib.parse

import pytest
from aws_lambda_powertools.utilities.batch.exceptions import BatchProcessingError

from leasehold.aws.faults import Fault
from leasehold.cells.failover import failback, failover
from leasehold.cli import main as cli_main
from leasehold.client import Client
from leasehold.clock import FakeClock
from leasehold.core.spec import JobSpec
from leasehold.core.states import JobState
from leasehold.errors import Fenced, NotFound
from leasehold.lifecycle import sweeper
from leasehold.lifecycle.app import Leasehold
from leasehold.lifecycle.submission import submit
from leasehold.lifecycle.worker import Worker

from .api_client import api_for
from .cells_helpers import cell_of, control_table_for
from .helpers import deliver, submit_swept

pytestmark = pytest.mark.ddblocal


@pytest.fixture
def two_cells(make_app, registry) -> tuple[Leasehold, Leasehold]:  # type: ignore[no-untyped-def]
    registry.task("echo")(lambda payload, ctx: payload)
    return make_app(), make_app()


def test_a_cell_answers_421_with_the_home_s_url_for_a_tenant_homed_elsewhere(
        two_cells: tuple[Leasehold, Leasehold], clock: FakeClock) -> None:
    a, b = two_cells
    control = control_table_for(a)
    cell_of(a, "us-east-1", control)
    cell_b, _ = cell_of(b, "us-east-2", control)
    cell_b.renew()  # B's lease carries its URL
    # The first cell a tenant submits to becomes its home.
    first = api_for(b).post("/jobs", {"task": "echo", "payload": {}}, tenant="acme")
    assert first.status == 201
    answer = api_for(a).post("/jobs", {"task": "echo", "payload": {}}, tenant="acme")
    assert answer.status == 421
    assert answer.body["error"]["code"] == "misdirected"
    assert answer.body["error"]["home"] == "us-east-2"
    assert answer.body["error"]["home_url"] == "https://us-east-2.leasehold.test"
    assert answer.headers["Leasehold-Home-Url"] == "https://us-east-2.leasehold.test"
    # A tenant homed in A is accepted there, and misdirected from B.
    assert api_for(a).post("/jobs", {"task": "echo", "payload": {}},
                           tenant="globex").status == 201
    assert api_for(b).post("/jobs", {"task": "echo", "payload": {}},
                           tenant="globex").status == 421


@pytest.mark.parametrize("fault", [
    Fault(target="dynamodb.*", kind="throttle", times=None),
    Fault(target="dynamodb.*", kind="hang", times=None),
    Fault(target="dynamodb.*", kind="lose-raise", times=None),
], ids=["throttle", "hang", "lost-response-past-retries"])
def test_a_cell_cut_off_from_the_control_table_stops_leasing_within_its_lease(
        two_cells: tuple[Leasehold, Leasehold], clock: FakeClock, fault: Fault) -> None:
    a, _ = two_cells
    control = control_table_for(a)
    cell, injector = cell_of(a, "us-east-1", control)
    job = submit(a, JobSpec(task="echo", payload={"n": 1}, tenant="acme")).job
    assert cell.renew()
    injector.faults.append(fault)  # the control table is out of reach from now on
    renewed_at = cell.view.seen_at
    # Renewals fail, the lease stands until it runs out (less the skew)...
    clock.advance(20)
    assert deliver(a) == 1
    assert a.store.get(job.job_id).state is JobState.SUCCEEDED
    # ... and past it the cell takes no lease: the message is not acknowledged, and the
    # job waits in this cell (QUEUED) for the lease to come back.
    clock.set(renewed_at + cell.lease_ms - cell.skew_ms)
    with pytest.raises(Fenced):
        cell.guard(a, a.now())
    second = submit(a, JobSpec(task="echo", payload={"n": 2}, tenant="acme")).job
    with pytest.raises(BatchProcessingError):  # every record of the batch failed: all back
        deliver(a)
    assert a.store.get(second.job_id).state is JobState.QUEUED
    injector.close()
    assert injector.injected, "the fault never hit a control-table call"


def test_a_lost_renewal_response_does_not_fence_the_cell(
        two_cells: tuple[Leasehold, Leasehold], clock: FakeClock) -> None:
    a, _ = two_cells
    control = control_table_for(a)
    cell, injector = cell_of(a, "us-east-1", control)
    assert cell.renew()
    injector.faults.append(Fault(target="dynamodb.UpdateItem", kind="lose", times=1))
    clock.advance(12)
    # botocore retries the lost renewal; the retry meets the write its first try made,
    # and its condition (this epoch, active) still holds.
    assert cell.renew()
    clock.advance(20)
    cell.guard(a, a.now())  # still held: the renewal 20 s ago counts
    assert injector.injected


def test_a_failover_fences_a_reachable_cell_at_its_next_renewal_and_moves_new_work(
        two_cells: tuple[Leasehold, Leasehold], clock: FakeClock) -> None:
    a, b = two_cells
    control = control_table_for(a)
    cell_a, _ = cell_of(a, "us-east-1", control)
    cell_b, _ = cell_of(b, "us-east-2", control)
    assert cell_a.renew() and cell_b.renew()
    assert api_for(a).post("/jobs", {"task": "echo", "payload": {"n": 1}},
                           tenant="acme").status == 201
    declared = failover(control, source="us-east-1", to="us-east-2", now=a.now())
    assert [home.tenant for home in declared.moved] == ["acme"]
    assert declared.moved[0].epoch == 2
    # B takes acme's new work as soon as its cached home expires (none cached here).
    assert api_for(b).post("/jobs", {"task": "echo", "payload": {"n": 2}},
                           tenant="acme").status == 201
    # A, still reachable, is refused at its next renewal and stops at once.
    clock.advance(11)
    with pytest.raises(Fenced):
        cell_a.guard(a, a.now())
    assert deliver(b) == 1


def test_a_fenced_cell_records_no_finish_and_runs_the_job_once_after_failback(
        two_cells: tuple[Leasehold, Leasehold], clock: FakeClock, registry) -> None:  # type: ignore[no-untyped-def]
    a, _ = two_cells
    runs: list[int] = []
    control = control_table_for(a)
    cell, _ = cell_of(a, "us-east-1", control)
    assert cell.renew()

    def work(payload, ctx):  # type: ignore[no-untyped-def]
        runs.append(payload["n"])
        if len(runs) == 1:  # the Region is failed over while this attempt runs
            failover(control, source="us-east-1", to="us-east-2", now=a.now())
            clock.advance(11)
        return payload

    registry.task("work")(work)
    # Row first with its sweep entry, so the re-run below comes from the sweeper on the
    # test clock (a plain job sent first comes back through its message's visibility).
    job = submit_swept(a, JobSpec(task="work", payload={"n": 1}, tenant="acme")).job
    with pytest.raises(BatchProcessingError):
        deliver(a, Worker(a))
    # The finish found the cell fenced: nothing recorded, the job is still RUNNING in A.
    assert a.store.get(job.job_id).state is JobState.RUNNING
    failback(control, region="us-east-1", now=a.now())
    clock.advance(a.settings.lease_seconds + a.settings.skew_grace_seconds + 60)
    sweeper.sweep(a)
    deliver(a)
    final = a.store.get(job.job_id)
    assert final.state is JobState.SUCCEEDED
    assert runs == [1, 1]  # the attempt that could not finish, then its one re-run


def _transport(cells: dict[str, Leasehold]):  # type: ignore[no-untyped-def]
    """The client's HTTP, to each cell's API handler by host (no sockets)."""
    def send(method: str, url: str, headers, body, timeout):  # type: ignore[no-untyped-def]
        parts = urllib.parse.urlsplit(url)
        path = parts.path + (f"?{parts.query}" if parts.query else "")
        reply = api_for(cells[parts.netloc]).call(method, path, raw=body,
                                                  headers=dict(headers))
        return reply.status, reply.headers, json.dumps(reply.body).encode()
    return send


def test_the_client_and_the_cli_follow_a_failover_to_the_new_home(
        two_cells: tuple[Leasehold, Leasehold], clock: FakeClock,
        capsys: pytest.CaptureFixture[str]) -> None:
    a, b = two_cells
    control = control_table_for(a)
    cell_of(a, "us-east-1", control)
    cell_b, _ = cell_of(b, "us-east-2", control)
    cell_b.renew()
    client = Client("https://us-east-1.leasehold.test", tenant="acme",
                    transport=_transport({"us-east-1.leasehold.test": a,
                                          "us-east-2.leasehold.test": b}))
    first = client.submit("echo", {"n": 1})
    assert a.store.get(first.job_id).tenant == "acme"
    code = cli_main(["regions", "failover", "--from", "us-east-1", "--to", "us-east-2",
                     "--control-table", control.table, "--json"])
    assert code == 0
    assert json.loads(capsys.readouterr().out)["moved"][0]["home"] == "us-east-2"
    clock.advance(6)  # A's cached home of acme expires
    second = client.submit("echo", {"n": 2})  # 421 from A, followed to B
    assert b.store.get(second.job_id).tenant == "acme"
    assert client.url == "https://us-east-2.leasehold.test"
    # The first job stays in A (fail-static): nothing was copied to B.
    with pytest.raises(NotFound):
        b.store.get(first.job_id)
