"""The Lambda entry points, driven with the events AWS would send them."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any

import pytest

from leasehold.compose import compose
from leasehold.core.registry import default_registry
from leasehold.core.spec import JobSpec
from leasehold.core.states import JobState
from leasehold.handlers import sweeper as sweeper_handler
from leasehold.handlers import worker as worker_handler
from leasehold.lifecycle.app import Leasehold
from leasehold.lifecycle.consumer import as_event
from leasehold.lifecycle.submission import submit

from .helpers import receive_all


@dataclass
class LambdaContext:
    function_name: str = "leasehold-worker"
    memory_limit_in_mb: int = 512
    invoked_function_arn: str = "arn:aws:lambda:us-east-1:123456789012:function:w"
    aws_request_id: str = "req-1"


@pytest.fixture
def deployed(app: Leasehold, monkeypatch: pytest.MonkeyPatch) -> Leasehold:
    """The environment a deployed function gets, pointing at this test's resources."""
    for name, value in app.settings.to_env().items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("LEASEHOLD_TASKS", "examples.tasks")
    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "Leasehold")
    monkeypatch.setenv("POWERTOOLS_SERVICE_NAME", "leasehold")
    worker_handler._worker.cache_clear()
    sweeper_handler._app.cache_clear()
    yield compose(app.settings.with_(task_modules=("examples.tasks",)),
                                  registry=default_registry)
    worker_handler._worker.cache_clear()
    sweeper_handler._app.cache_clear()


def emf_metrics(output: str) -> dict[str, float]:
    found: dict[str, float] = {}
    for line in output.splitlines():
        if line.startswith("{") and '"_aws"' in line:
            blob = json.loads(line)
            for directive in blob["_aws"]["CloudWatchMetrics"]:
                assert directive["Namespace"] == "Leasehold"
                for metric in directive["Metrics"]:
                    value = blob[metric["Name"]]
                    found[metric["Name"]] = sum(value) if isinstance(value, list) else value
    return found


def test_the_worker_lambda_runs_a_batch_reports_no_failures_and_emits_job_metrics(
    deployed: Leasehold, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="leasehold.lifecycle.worker")
    jobs = [submit(deployed, JobSpec(task="echo", payload={"n": n})).job for n in range(3)]
    messages = receive_all(deployed)
    arn = "arn:aws:sqs:us-east-1:123456789012:" + deployed.queues.url(
        "default", "normal").rsplit("/", 1)[-1]
    capsys.readouterr()
    response = worker_handler.handler(as_event(messages, arn), LambdaContext())
    assert response == {"batchItemFailures": []}
    for job in jobs:
        done = deployed.store.get(job.job_id)
        assert (done.state, done.result) == (JobState.SUCCEEDED, {"n": job.payload["n"]})
    output = capsys.readouterr().out
    assert emf_metrics(output)["JobsSucceeded"] == 3
    # Each outcome is logged with the job's keys, which the JSON formatter puts on the line.
    logged = [r for r in caplog.records if hasattr(r, "outcome")]
    assert {r.job_id for r in logged} == {job.job_id for job in jobs}  # type: ignore[attr-defined]
    assert {r.tenant for r in logged} == {"default"}  # type: ignore[attr-defined]


def test_a_malformed_record_fails_alone_and_the_rest_of_the_batch_succeeds(
    deployed: Leasehold,
) -> None:
    job = submit(deployed, JobSpec(task="echo", payload=1)).job
    [message] = receive_all(deployed)
    arn = "arn:aws:sqs:us-east-1:123456789012:" + message.queue_url.rsplit("/", 1)[-1]
    event = as_event([message], arn)
    broken = dict(event["Records"][0], messageId="broken", receiptHandle="nope",
                  body=json.dumps({"job_id": job.job_id, "epoch": "x"}))
    event["Records"].append(broken)
    response = worker_handler.handler(event, LambdaContext())
    # A body that is not a hand-off is acknowledged as stale, never retried forever.
    assert response == {"batchItemFailures": []}
    assert deployed.store.get(job.job_id).state is JobState.SUCCEEDED


def test_the_sweeper_lambda_reports_what_it_did(deployed: Leasehold) -> None:
    report: dict[str, Any] = sweeper_handler.handler({"source": "aws.events"}, LambdaContext())
    assert report["examined"] == 0 and report["recovered"] == 0
