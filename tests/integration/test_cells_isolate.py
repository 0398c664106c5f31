"""``LEASEHOLD_FAULTS=isolate`` (issue 48): a cell process whose Region is off. Every AWS call
it makes fails (or hangs), its control-table calls included, so it holds no Region lease:
it leases nothing and refuses new work, while the other cells carry on."""

from __future__ import annotations

import pytest
from botocore.exceptions import ClientError

from leasehold.aws.clients import Clients
from leasehold.aws.faults import parse
from leasehold.clock import FakeClock
from leasehold.compose import compose
from leasehold.core.registry import TaskRegistry
from leasehold.core.spec import JobSpec
from leasehold.core.states import JobState
from leasehold.errors import ValidationError
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
