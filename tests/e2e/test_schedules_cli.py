"""``leasehold schedules ...`` against the real runtime: the commands a user types.

The CLI runs in this process (its ``main``, as the console script calls it) and talks HTTP to
the runtime's subprocess: a new interpreter per command would cost a second of imports each.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from leasehold.cli import main

from .conftest import Runtime

pytestmark = pytest.mark.e2e
TENANT = "cli-schedules"


@dataclass
class Done:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        assert self.code == 0, self.err
        return json.loads(self.out)


Cli = Callable[..., Done]


@pytest.fixture
def cli(runtime: Runtime, capsys: pytest.CaptureFixture[str]) -> Cli:
    """Run ``leasehold schedules <args>`` as the test tenant; ``--json`` unless told not to."""

    def run(*args: str, json_out: bool = True) -> Done:
        extra = ["--json"] if json_out else []
        code = main(["schedules", *args, *extra, "--url", runtime.url, "--tenant", TENANT])
        captured = capsys.readouterr()
        return Done(code, captured.out, captured.err)

    return run


def listed(cli: Cli) -> set[str]:
    return {s["schedule_id"] for s in cli("list").json()["schedules"]}


def test_create_list_preview_pause_and_delete_a_schedule(cli: Cli) -> None:
    created = cli("create", "--name", "standup", "--cron", "30 9 * * 1-5",
                  "--timezone", "Europe/London", "--task", "echo",
                  "--payload", '{"room": "b"}').json()
    schedule_id = created["schedule_id"]
    assert (created["state"], created["timezone"], created["payload"]) == (
        "ACTIVE", "Europe/London", {"room": "b"})
    assert schedule_id in listed(cli)

    times = cli("next", schedule_id, "--count", "4").json()["times"]
    local = [datetime.fromisoformat(t.replace("Z", "+00:00")).astimezone(
        ZoneInfo("Europe/London")) for t in times]
    assert len(local) == 4 and local == sorted(local)
    assert all((t.hour, t.minute, t.weekday() < 5) == (9, 30, True) for t in local), local
    assert created["next_fire_at"] == times[0]

    assert cli("pause", schedule_id).json()["state"] == "PAUSED"
    assert cli("get", schedule_id).json()["state"] == "PAUSED"
    assert cli("resume", schedule_id).json()["state"] == "ACTIVE"

    deleted = cli("delete", schedule_id, json_out=False)
    assert (deleted.code, deleted.out.strip()) == (0, f"deleted {schedule_id}"), deleted.err
    gone = cli("get", schedule_id)
    assert gone.code == 1 and "404" in gone.err
    assert schedule_id not in listed(cli)


def test_trigger_runs_the_job_now_and_jobs_lists_it(runtime: Runtime, cli: Cli) -> None:
    # A schedule that would not fire for months: only the trigger makes a job.
    schedule_id = cli("create", "--cron", "0 0 1 1 *", "--task", "echo",
                      "--payload", '"now"').json()["schedule_id"]
    job = cli("trigger", schedule_id).json()
    assert job["schedule_id"] == schedule_id
    done = runtime.wait_for([job["job_id"]], tenant=TENANT)[job["job_id"]]
    assert (done["state"], done["result"]) == ("SUCCEEDED", "now")
    runs = cli("jobs", schedule_id).json()["jobs"]
    assert [run["job_id"] for run in runs] == [job["job_id"]]
    assert cli("delete", schedule_id, json_out=False).code == 0


def test_a_bad_expression_is_refused_naming_the_field(cli: Cli) -> None:
    refused = cli("create", "--cron", "every tuesday", "--task", "echo")
    assert refused.code == 1
    assert "422" in refused.err and "cron" in refused.err
