"""``LEASEHOLD_FAULTS=isolate`` (issue 48): a cell process whose Region is off. Every AWS call
it makes fails (or hangs), its control-table calls included, so it holds no Region lease:
it leases nothing and refuses new work, while the other cells carry on."""

from __future__ import annotations

from pathlib import Path

import pytest
from botocore.exceptions import ClientError

from leasehold.aws.clients import Clients
from leasehold.aws.faults import parse
from leasehold.aws.isolation import ENV as ISOLATE_ENV
from leasehold.aws.isolation import IsolationSwitch
from leasehold.cells import Cell
from leasehold.clock import FakeClock
from leasehold.compose import compose
from leasehold.core.registry import TaskRegistry
from leasehold.core.spec import JobSpec
from leasehold.core.states import JobState
from leasehold.errors import Fenced, ValidationError
from leasehold.lifecycle.app import Leasehold
from leasehold.lifecycle.submission import submit

from .api_client import api_for
from .cells_helpers import cell_of, control_table_for
from .helpers import deliver

pytestmark = pytest.mark.ddblocal


def test_isolate_is_every_call_refused_or_hanging_for_good() -> None:
    assert [(f.target, f.kind, f.times) for f in parse("isolate")] == [("*", "fail", None)]
    assert [(f.target, f.kind, f.times) for f in parse("isolate:hang")] == [("*", "hang", None)]
    with pytest.raises(ValidationError):
        parse("isolate:lose")


def test_a_cell_started_isolated_leases_nothing_and_refuses_new_work(
        make_app, registry: TaskRegistry, clock: FakeClock,  # type: ignore[no-untyped-def]
        monkeypatch: pytest.MonkeyPatch) -> None:
    registry.task("echo")(lambda payload, ctx: payload)
    a, b = make_app(), make_app()
    control = control_table_for(a)
    cell_b, _ = cell_of(b, "us-east-2", control)
    assert cell_b.renew()
    waiting = submit(a, JobSpec(task="echo", payload={}, tenant="acme")).job

    # Region us-east-1's process starts with the Region off.
    monkeypatch.setenv("LEASEHOLD_FAULTS", "isolate")
    settings = a.settings.with_(cell_region="us-east-1", control_table=control.table,
                                cell_url="https://us-east-1.leasehold.test")
    isolated: Leasehold = compose(settings, clock=clock, registry=registry,
                                  clients=Clients(settings))
    with pytest.raises(ClientError):
        isolated.clients.dynamodb.describe_table(TableName=settings.jobs_table)
    answer = api_for(isolated).post("/jobs", {"task": "echo", "payload": {}}, tenant="acme")
    assert answer.status == 503
    assert answer.body["error"]["code"] == "cell_fenced"
    assert control.region("us-east-1") is None  # it never wrote its lease

    # The other cells carry on; what waited in us-east-1 is still there, untouched.
    assert api_for(b).post("/jobs", {"task": "echo", "payload": {}},
                           tenant="globex").status == 201
    assert deliver(b) == 1
    assert a.store.get(waiting.job_id).state is JobState.QUEUED


def test_a_cell_isolated_while_it_runs_stops_and_works_again_when_brought_back(
        make_app, registry: TaskRegistry, clock: FakeClock,  # type: ignore[no-untyped-def]
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """``leasehold regions isolate`` (the cell's ``LEASEHOLD_ISOLATE_FILE``): the switch,
    flipped by another process, takes the running cell's jobs tables and control table off
    at once, and clearing it brings both back."""
    registry.task("echo")(lambda payload, ctx: payload)
    control = control_table_for(make_app())
    switch = IsolationSwitch(tmp_path / "us-east-1" / "isolated")
    monkeypatch.setenv(ISOLATE_ENV, str(switch.path))
    settings = make_app().settings.with_(cell_region="us-east-1", control_table=control.table,
                                         cell_url="https://us-east-1.leasehold.test")
    app: Leasehold = compose(settings, clock=clock, registry=registry,
                             clients=Clients(settings))
    cell = next(g.__self__ for g in app.work_guards if isinstance(getattr(g, "__self__", None),
                                                                  Cell))
    assert api_for(app).post("/jobs", {"task": "echo", "payload": {}},
                             tenant="acme").status == 201
    waiting = submit(app, JobSpec(task="echo", payload={}, tenant="acme")).job

    switch.set("fail")
    with pytest.raises(ClientError):
        app.clients.dynamodb.describe_table(TableName=settings.jobs_table)
    with pytest.raises(ClientError):  # nothing received: the queues are off too
        deliver(app)
    clock.advance(cell.lease_ms / 1000 + 1)
    with pytest.raises(Fenced):  # nor can it renew its Region lease
        cell.guard(app, app.now())

    assert switch.clear()
    clock.advance(cell.cache_ms / 1000)  # its next try to renew (one per cache period)
    assert deliver(app) == 2
    assert app.store.get(waiting.job_id).state is JobState.SUCCEEDED
    assert control.region("us-east-1").epoch == 1  # type: ignore[union-attr]
