"""A pool's secrets (``PoolConfig.secrets``) at run time: read from Secrets Manager or an SSM
SecureString into the environment before the task modules are imported, by the Lambda
worker and by ``leasehold worker``; a throttled read is retried; a read that fails names the
variable and the reference; the value is in no row and no log line.

Real moto behind the clients; faults at the botocore layer (:mod:`leasehold.aws.faults`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import sys
import uuid
from pathlib import Path
from typing import Any

import boto3
import pytest

from leasehold.aws import secrets
from leasehold.aws.clients import Clients
from leasehold.aws.faults import Fault, FaultInjector
from leasehold.cli import main
from leasehold.core.registry import default_registry
from leasehold.core.spec import JobSpec
from leasehold.core.states import JobState
from leasehold.handlers import worker as worker_handler
from leasehold.lifecycle.app import Leasehold
from leasehold.lifecycle.consumer import as_event
from leasehold.lifecycle.submission import submit
from leasehold.settings import Settings
from tests.integration.helpers import receive_all
from tests.integration.test_handlers import LambdaContext

#: The secrets' values: a test fails if either shows up where it must not.
API_KEY = "sentinel-api-key-7f3a9c"
DB_PASSWORD = "sentinel-db-password-51e2"

TASKS = '''\
import hashlib
import os

from leasehold import task

# Read at import: the secrets must be in the environment before task modules are imported.
AT_IMPORT = {{name: os.environ.get(name) for name in ("API_KEY", "DB_PASSWORD")}}


def digest(value):
    return None if value is None else hashlib.sha256(value.encode()).hexdigest()


@task("{name}")
def probe(payload, ctx):
    return {{name: {{"import": digest(AT_IMPORT[name]), "run": digest(os.environ.get(name))}}
            for name in AT_IMPORT}}
'''


def _digest(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


@pytest.fixture
def stored(aws: None) -> dict[str, str]:
    """One secret in Secrets Manager, one SecureString in SSM; the LEASEHOLD_SECRETS value."""
    name = f"app/{uuid.uuid4().hex[:8]}"
    boto3.client("secretsmanager").create_secret(Name=f"{name}/api-key", SecretString=API_KEY)
    boto3.client("ssm").put_parameter(Name=f"/{name}/db-password", Value=DB_PASSWORD,
                                      Type="SecureString")
    return {"API_KEY": f"{name}/api-key", "DB_PASSWORD": f"ssm:/{name}/db-password"}


@pytest.fixture
def task_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """A task module of its own (imported by the worker as LEASEHOLD_TASKS), forgotten after."""
    module = f"secret_probe_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{module}.py").write_text(TASKS.format(name=module))
    monkeypatch.syspath_prepend(str(tmp_path))
    yield module
    default_registry.forget(module)
    sys.modules.pop(module, None)


def _scan(app: Leasehold) -> str:
    items = boto3.client("dynamodb").scan(TableName=app.settings.jobs_table)["Items"]
    return json.dumps(items)


def test_secrets_reach_the_task_before_its_module_is_imported_and_nowhere_else(
        app: Leasehold, stored: dict[str, str], task_module: str,
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    for name, value in app.settings.to_env().items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("LEASEHOLD_TASKS", task_module)
    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "Leasehold")
    monkeypatch.setenv("POWERTOOLS_SERVICE_NAME", "leasehold")
    monkeypatch.setenv(secrets.SECRETS_VAR, json.dumps(stored))
    for name in stored:
        # Recorded, so that the values the worker sets are removed after the test.
        monkeypatch.setenv(name, "unset")
        monkeypatch.delenv(name)
    worker_handler._worker.cache_clear()
    secrets._loader.cache_clear()
    # The submitting side knows the task by name; only the worker imports its module.
    app.registry.task(task_module)(lambda payload, ctx: None)
    try:
        job = submit(app, JobSpec(task=task_module, payload={})).job
        messages = receive_all(app)
        arn = "arn:aws:sqs:us-east-1:123456789012:" + messages[0].queue_url.rsplit("/", 1)[-1]
        assert worker_handler.handler(as_event(messages, arn), LambdaContext()) \
            == {"batchItemFailures": []}
    finally:
        worker_handler._worker.cache_clear()
        secrets._loader.cache_clear()
    done = app.store.get(job.job_id)
    assert done.state is JobState.SUCCEEDED
    assert done.result == {
        "API_KEY": {"import": _digest(API_KEY), "run": _digest(API_KEY)},
        "DB_PASSWORD": {"import": _digest(DB_PASSWORD), "run": _digest(DB_PASSWORD)},
    }
    output = capsys.readouterr()
    logged = "\n".join(record.getMessage() for record in caplog.records)
    for value in (API_KEY, DB_PASSWORD):
        assert value not in _scan(app)
        assert value not in output.out + output.err
        assert value not in logged


def _loader(faults: list[Fault], max_age: int = secrets.MAX_AGE_SECONDS) -> tuple[
        secrets.SecretsLoader, FaultInjector]:
    injector = FaultInjector(faults, throttle_delay=0)
    return secrets.SecretsLoader(Clients(Settings(), faults=injector), max_age=max_age), injector


def test_a_throttled_first_read_is_retried_and_the_value_arrives(
        stored: dict[str, str]) -> None:
    loader, injector = _loader([
        Fault(target="secrets-manager.GetSecretValue", kind="throttle", times=2),
        Fault(target="ssm.GetParameter", kind="throttle", times=2)])
    environ = {secrets.SECRETS_VAR: json.dumps(stored)}
    assert sorted(loader.apply(environ)) == ["API_KEY", "DB_PASSWORD"]
    assert (environ["API_KEY"], environ["DB_PASSWORD"]) == (API_KEY, DB_PASSWORD)
    assert injector.injected == {("secrets-manager.GetSecretValue", "throttle"): 2,
                                 ("ssm.GetParameter", "throttle"): 2}


def test_a_first_read_that_fails_stops_the_start_naming_the_variable_and_the_secret(
        stored: dict[str, str]) -> None:
    # An error botocore does not retry (what a throttle that outlasts the client's eight
    # attempts also ends in, after about half a minute of backoff).
    loader, _ = _loader([Fault(target="secrets-manager.GetSecretValue", kind="fail",
                               times=None)])
    environ = {secrets.SECRETS_VAR: json.dumps(stored)}
    with pytest.raises(secrets.SecretUnavailable) as failure:
        loader.apply(environ)
    message = str(failure.value)
    assert message.startswith(f"secret API_KEY (secretsmanager {stored['API_KEY']!r}) could "
                              "not be read: ")
    assert "API_KEY" not in {k for k in environ if k != secrets.SECRETS_VAR}


def test_a_refresh_that_fails_keeps_the_value_read_before_and_logs_no_value(
        stored: dict[str, str], caplog: pytest.LogCaptureFixture) -> None:
    # max_age=0: every apply reads again, as a warm worker does once the cache expired.
    loader, injector = _loader([], max_age=0)
    environ = {secrets.SECRETS_VAR: json.dumps(stored)}
    loader.apply(environ)
    injector.faults.append(Fault(target="ssm.GetParameter", kind="fail", times=None))
    caplog.set_level(logging.DEBUG)
    assert loader.apply(environ) == ["API_KEY"]
    assert environ["DB_PASSWORD"] == DB_PASSWORD
    (warning,) = [r for r in caplog.records if r.name == secrets.__name__]
    assert "secret DB_PASSWORD" in warning.getMessage()
    assert DB_PASSWORD not in warning.getMessage() and API_KEY not in caplog.text


def test_a_rotated_secret_reaches_a_warm_worker_once_the_cache_expires(
        stored: dict[str, str]) -> None:
    environ = {secrets.SECRETS_VAR: json.dumps(stored)}
    cached, _ = _loader([])
    fresh, _ = _loader([], max_age=0)
    cached.apply(environ)
    fresh.apply(dict(environ))
    boto3.client("secretsmanager").put_secret_value(SecretId=stored["API_KEY"],
                                                     SecretString="rotated")
    cached.apply(environ)
    assert environ["API_KEY"] == API_KEY  # within the TTL: the cached value, no read
    again = dict(environ)
    fresh.apply(again)
    assert again["API_KEY"] == "rotated"


def test_leasehold_worker_reads_the_pools_secrets_before_it_starts(
        stored: dict[str, str], monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    # The ECS worker: a secret that cannot be read stops it at once, named, before compose
    # (which would fail on the task module that does not exist).
    missing = {**stored, "API_KEY": "app/no-such-secret"}
    monkeypatch.setenv(secrets.SECRETS_VAR, json.dumps(missing))
    secrets._loader.cache_clear()
    try:
        assert main(["worker", "--pool", "default", "--tasks", "no_such_task_module"]) == 1
    finally:
        secrets._loader.cache_clear()
    err = capsys.readouterr().err
    assert "leasehold worker: secret API_KEY (secretsmanager 'app/no-such-secret') could " \
           "not be read" in err
    assert DB_PASSWORD not in err
