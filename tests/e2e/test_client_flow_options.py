"""Every client path (``Client().submit``, ``task.submit`` and ``leasehold submit``) submits a
task whose ``debounce`` or ``unique`` is declared on the task, against a real
``leasehold dev``: the client's own retry token never makes the API refuse the submission,
and a debounced submit whose answer was lost is sent again and carried by the same job."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator, Mapping

import pytest

from leasehold.client import Client, set_default_client
from leasehold.client.transport import http
from tests.e2e.contract_tasks import import_file, rebuild_doc

from .conftest import ROOT, Runtime, start_runtime

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def runtime() -> Iterator[Runtime]:
    started = start_runtime("--workers", "1", "--tasks",
                            "examples.tasks,tests.e2e.contract_tasks")
    yield started
    assert started.stop() == 0, "".join(started.output[-30:])


@pytest.fixture
def default_client(runtime: Runtime, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("LEASEHOLD_URL", runtime.url)  # what the banner says to export
    set_default_client(None)
    yield
    set_default_client(None)


def cli_submit(runtime: Runtime, *args: str) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-m", "leasehold.cli", "submit", *args, "--json", "--url",
         runtime.url], capture_output=True, text=True, check=False, cwd=ROOT,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "functions"),
                                                          str(ROOT)])}, timeout=60)
    assert done.returncode == 0, done.stderr
    answer: dict[str, object] = json.loads(done.stdout)
    return answer


def test_a_task_declared_with_debounce_is_submitted_by_every_client_path(
        runtime: Runtime, default_client: None) -> None:
    client = Client(runtime.url)
    first = client.submit("rebuild-doc", {"doc": "guide", "v": 1})
    second = rebuild_doc.submit({"doc": "guide", "v": 2})
    third = cli_submit(runtime, "rebuild-doc", '{"doc": "guide", "v": 3}')
    assert first.created and not second.created
    assert second.job_id == first.job_id and third["job_id"] == first.job_id
    assert second.job["coalesced"] and third["coalesced"]
    # One run, with the latest payload.
    assert first.result(timeout=30) == {"doc": "guide", "v": 3}


def test_a_task_declared_unique_is_submitted_by_every_client_path(
        runtime: Runtime, default_client: None) -> None:
    client = Client(runtime.url)
    first = client.submit("import-file", {"file": "a.csv", "seconds": 3})
    second = import_file.submit({"file": "a.csv", "seconds": 3})
    third = cli_submit(runtime, "import-file", '{"file": "a.csv", "seconds": 3}')
    assert first.created
    assert second.job_id == first.job_id and third["job_id"] == first.job_id
    assert second.job["duplicate"] and third["duplicate"]
    assert first.result(timeout=30) == {"file": "a.csv", "seconds": 3}


def test_a_debounced_submit_whose_answer_was_lost_is_carried_by_one_job(
        runtime: Runtime) -> None:
    lost: list[str] = []

    def loses_first_answer(method: str, url: str, headers: Mapping[str, str],
                           body: bytes | None, timeout: float
                           ) -> tuple[int, Mapping[str, str], bytes]:
        answer = http(method, url, headers, body, timeout)  # the request lands ...
        if method == "POST" and not lost:
            lost.append(url)
            raise ConnectionResetError("connection reset by peer")  # ... its answer does not
        return answer

    client = Client(runtime.url, tenant="lost-debounce", transport=loses_first_answer)
    job = client.submit("rebuild-doc", {"doc": "lost", "v": 1})
    assert lost  # the first answer was lost, and the submit was sent again
    assert not job.created and job.job["coalesced"]  # the repeat joined the first's window
    assert job.result(timeout=30) == {"doc": "lost", "v": 1}
    jobs = Client(runtime.url, tenant="lost-debounce").list(task="rebuild-doc")
    assert [j["job_id"] for j in jobs["jobs"]] == [job.job_id]
