"""``Client.submit_many`` and ``leasehold submit-many`` through the API handler in this
process: chunks of 100, per-item results in order, a lost answer resent once."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from leasehold.cli import main
from leasehold.cli.client import Client as CliClient
from leasehold.client import AsyncClient
from leasehold.core.registry import TaskRegistry
from leasehold.core.states import JobState
from leasehold.lifecycle.app import Leasehold
from tests.integration.helpers import deliver
from tests.integration.test_client_operations import client_for


@pytest.fixture
def echo(registry: TaskRegistry) -> TaskRegistry:
    @registry.task("echo")
    def run(payload: Any, ctx: Any) -> Any:
        return payload

    return registry


def rows(app: Leasehold) -> int:
    return int(app.clients.dynamodb.scan(TableName=app.settings.jobs_table,
                                         Select="COUNT")["Count"])


def test_submit_many_sends_100_per_request_and_answers_every_job_in_order(
        app: Leasehold, echo: TaskRegistry) -> None:
    client = client_for(app, "acme")
    sent: list[int] = []
    inner = client.transport

    def counting(method: str, url: str, headers: Mapping[str, str], body: bytes | None,
                 timeout: float) -> tuple[int, Mapping[str, str], bytes]:
        sent.append(len(json.loads(body or b"{}").get("jobs", [])))
        return inner(method, url, headers, body, timeout)

    client.transport = counting
    # Refused items (an unknown task) keep it fast; three real jobs span the chunks.
    jobs: list[dict[str, Any]] = [{"task": f"nope{i}"} for i in range(150)]
    for i in (0, 120, 149):
        jobs[i] = {"task": "echo", "payload": i}
    results = client.submit_many(jobs)
    assert sent == [100, 50]
    assert [r["index"] for r in results] == list(range(150))
    assert [i for i, r in enumerate(results) if r["status"] == 201] == [0, 120, 149]
    assert results[120]["job"]["payload"] == 120
    assert results[130]["error"]["field"] == "jobs[30].task"  # its place in its request
    assert rows(app) == 3


def test_a_batch_whose_answer_was_lost_is_sent_again_and_makes_each_job_once(
        app: Leasehold, echo: TaskRegistry) -> None:
    client = client_for(app, "acme")
    inner, tries = client.transport, []

    def lossy(method: str, url: str, headers: Mapping[str, str], body: bytes | None,
              timeout: float) -> tuple[int, Mapping[str, str], bytes]:
        answer = inner(method, url, headers, body, timeout)  # it lands
        tries.append(headers.get("Idempotency-Key"))
        if len(tries) == 1:
            raise ConnectionResetError("the answer was lost")
        return answer

    client.transport = lossy
    results = client.submit_many([{"task": "echo", "payload": i} for i in range(4)])
    assert len(tries) == 2 and tries[0] == tries[1] and tries[0]  # the same batch key
    assert [r["status"] for r in results] == [200] * 4  # the first try made them
    assert rows(app) == 4
    deliver(app)
    assert all(app.store.get(r["job"]["job_id"]).state is JobState.SUCCEEDED
               for r in results)


def test_the_async_client_submits_many_too(app: Leasehold, echo: TaskRegistry) -> None:
    aio = AsyncClient()
    aio.sync = client_for(app, "acme")
    results = asyncio.run(aio.submit_many([{"task": "echo", "payload": 1}, {"task": "x"}]))
    assert [r["status"] for r in results] == [201, 422]


def test_the_cli_submits_json_lines_prints_a_line_each_and_fails_if_any_failed(
        app: Leasehold, echo: TaskRegistry, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(CliClient, "from_args", classmethod(lambda cls, args: client_for(
        app, "acme")))
    good = tmp_path / "good.jsonl"
    good.write_text('{"task": "echo", "payload": 1}\n\n{"task": "echo", "payload": 2}\n')
    assert main(["submit-many", str(good)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines] == ["201", "201"]
    mixed = tmp_path / "mixed.jsonl"
    mixed.write_text('{"task": "echo"}\n{"task": "nope"}\n')
    assert main(["submit-many", str(mixed)]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("201 ")
    assert lines[1] == "422 error: jobs[1].task: unknown task 'nope'"
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"task": "echo"}\n[1]\n')
    assert main(["submit-many", str(bad)]) == 1
    assert "line 2 is not a JSON object" in capsys.readouterr().err
    assert rows(app) == 3
