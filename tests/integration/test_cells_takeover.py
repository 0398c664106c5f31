"""Take-over (issue 48, ``leasehold.cells.takeover``): a take-over cut short and run again
re-creates each job once; what it cannot carry (a durable sleeper, a workflow's step) is
left to wait for its Region; a job the replica showed running is reported at once."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pytest

from leasehold.aws.dynamo import from_av
from leasehold.aws.faults import Fault, InjectedCrash
from leasehold.cells.takeover import TAKEN_FROM, retire, take_over
from leasehold.cli import main as cli_main
from leasehold.core.spec import JobSpec
from leasehold.core.states import JobState
from leasehold.lifecycle.app import Leasehold
from leasehold.lifecycle.submission import submit

from .api_client import api_for
from .cells_helpers import cell_of, control_table_for
from .helpers import inject

pytestmark = pytest.mark.ddblocal

A = "us-east-1"


@pytest.fixture
def two_cells(make_app, registry) -> tuple[Leasehold, Leasehold]:  # type: ignore[no-untyped-def]
    registry.task("echo")(lambda payload, ctx: payload)
    return make_app(), make_app()


def _rows(app: Leasehold) -> list[dict]:  # type: ignore[type-arg]
    pages = app.clients.dynamodb.get_paginator("scan").paginate(
        TableName=app.settings.jobs_table, ConsistentRead=True)
    return [from_av(item) for page in pages for item in page.get("Items", [])]


def _second(body: Mapping[str, Any]) -> bool:
    """A write of the job whose payload is {"n": 1} (the payload is a JSON string in it)."""
    return '"n":1}' in json.dumps(body).replace('\\"', '"').replace(" ", "")


@pytest.mark.parametrize("kind", ["crash", "lose"])
def test_a_take_over_cut_short_or_answered_late_and_run_again_creates_each_job_once(
        two_cells: tuple[Leasehold, Leasehold], kind: str) -> None:
    a, b = two_cells
    ids = [submit(a, JobSpec(task="echo", payload={"n": n}, tenant="acme")).job.job_id
           for n in range(4)]
    replica = _rows(a)
    # The operator's process dies before the second job's row is written (crash), or that
    # write's answer is lost and botocore sends it again (lose).
    injector = inject(b, Fault(target="dynamodb.PutItem|dynamodb.TransactWriteItems",
                               kind=kind, times=1, when=_second))
    if kind == "crash":
        with pytest.raises(InjectedCrash):
            take_over(b, replica, source=A, tenants=["acme"])
    else:
        assert len(take_over(b, replica, source=A, tenants=["acme"]).taken) == 4
    assert injector.injected
    injector.revive()  # the operator runs it again (a new process, if it died)
    again = take_over(b, replica, source=A, tenants=["acme"])
    assert sorted(t.source_id for t in again.taken) == sorted(ids)
    copies = [row for row in _rows(b)
              if row.get("labels", {}).get(TAKEN_FROM, "").startswith(f"{A}/")]
    assert len(copies) == 4
    assert sorted(json.loads(row["payload"])["n"] for row in copies) == [0, 1, 2, 3]


def test_what_lives_beyond_its_row_is_left_and_a_running_job_is_reported_at_once(
        two_cells: tuple[Leasehold, Leasehold]) -> None:
    a, b = two_cells
    queued = submit(a, JobSpec(task="echo", payload={"n": 1}, tenant="acme")).job
    running = submit(a, JobSpec(task="echo", payload={"n": 2}, tenant="acme")).job
    sleeping = submit(a, JobSpec(task="echo", payload={"n": 3}, tenant="acme")).job
    other = submit(a, JobSpec(task="echo", payload={"n": 4}, tenant="globex")).job
    replica = _rows(a)
    for row in replica:  # as the replica shows them: one running, one a durable sleeper
        if row.get("job_id") == running.job_id:
            row["state"], row["first_started_at"] = "RUNNING", row["created_at"]
        if row.get("job_id") == sleeping.job_id:
            row["state"] = "SLEEPING"
    done = take_over(b, replica, source=A, tenants=["acme"])
    assert sorted(t.source_id for t in done.taken) == sorted([queued.job_id, running.job_id])
    assert done.may_have_run == [running.job_id]
    assert list(done.left) == [sleeping.job_id]
    assert other.job_id not in {t.source_id for t in done.taken}  # globex stayed home
    # a returns: its copies are cancelled; one it had finished is a duplicate.
    duplicates = retire(a, done.taken)
    assert duplicates == []  # a never started either of them
    assert a.store.get(queued.job_id).state is JobState.CANCELLED


def _as_process_of(app: Leasehold, monkeypatch: pytest.MonkeyPatch) -> None:
    """This process's environment: ``app``'s cell (the operator's CLI composes it)."""
    for name, value in app.settings.to_env().items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("LEASEHOLD_TASKS", "examples.tasks")  # defines "echo" too


def test_the_cli_takes_over_on_failover_and_retires_the_copies_on_failback(
        two_cells: tuple[Leasehold, Leasehold], monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    a, b = two_cells
    control = control_table_for(a)
    cell_a, _ = cell_of(a, A, control)
    cell_b, _ = cell_of(b, "us-east-2", control)
    assert cell_a.renew() and cell_b.renew()
    made = [api_for(a).post("/jobs", {"task": "echo", "payload": {"n": n}}, tenant="acme")
            for n in range(2)]
    ids = sorted(answer.body["job_id"] for answer in made)

    _as_process_of(b, monkeypatch)
    assert cli_main(["regions", "failover", "--from", A, "--to", "us-east-2", "--take-over",
                     "--jobs-table", a.settings.jobs_table, "--replica-region", a.settings.region,
                     "--control-table", control.table,
                     "--json"]) == 0
    over = json.loads(capsys.readouterr().out)
    assert sorted(t["job_id"] for t in over["taken"]) == ids
    assert over["may_have_run"] == [] and over["left"] == {}
    assert all(b.store.get(t["new_job_id"]).tenant == "acme" for t in over["taken"])

    _as_process_of(a, monkeypatch)
    assert cli_main(["regions", "failback", "--region", A, "--taken-table",
                     b.settings.jobs_table, "--taken-region", b.settings.region,
                     "--control-table", control.table, "--json"]) == 0
    back = json.loads(capsys.readouterr().out)
    assert back["duplicates"] == []
    assert [a.store.get(job_id).state for job_id in ids] == [JobState.CANCELLED] * 2
