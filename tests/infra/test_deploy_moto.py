"""The synthesized template, created in moto's CloudFormation, carries a job end to end.

moto creates the tables, queues, KMS key, roles, functions and event source mappings from the
template (types moto does not model, such as alarms and the API stage, are skipped by moto).
moto cannot run Lambda code without Docker, so the test pauses the event source mappings and
plays the worker Lambda's part with the library's own consumer, against the stack's resources.
"""

from __future__ import annotations

import io
import json
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

from leasehold.app import Leasehold
from leasehold.consumer import consume
from leasehold.definitions import TABLES
from leasehold.registry import TaskRegistry
from leasehold.settings import Settings
from leasehold.spec import JobSpec
from leasehold.states import JobState
from leasehold.submission import submit
from leasehold.worker import Worker
from tests.infra.conftest import Synthesized

STACK = "Leasehold"
REGION = "us-east-1"


def _zip(directory: Path) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(directory.rglob("*")):
            if path.is_file():
                archive.write(path, path.relative_to(directory))
    return buffer.getvalue()


def publish_assets(outdir: Path, manifest_file: str) -> int:
    """Upload file assets where the template expects them (what ``cdk deploy`` does)."""
    s3 = boto3.client("s3", region_name=REGION)
    account = boto3.client("sts", region_name=REGION).get_caller_identity()["Account"]
    manifest = json.loads((outdir / manifest_file).read_text())
    published = 0
    for asset in manifest["files"].values():
        source = outdir / asset["source"]["path"]
        body = _zip(source) if asset["source"]["packaging"] == "zip" else source.read_bytes()
        for destination in asset["destinations"].values():
            bucket = destination["bucketName"].replace("${AWS::AccountId}", account) \
                .replace("${AWS::Region}", REGION)
            if bucket not in {b["Name"] for b in s3.list_buckets()["Buckets"]}:
                s3.create_bucket(Bucket=bucket)
            s3.put_object(Bucket=bucket, Key=destination["objectKey"], Body=body)
            published += 1
    return published


pytestmark = [pytest.mark.infra,
              pytest.mark.filterwarnings("ignore:Tried to parse:UserWarning")]


@pytest.fixture(scope="module")
def deployed(synthesized: Synthesized) -> Iterator[dict[str, str]]:
    """The stack's outputs once moto's CloudFormation has created it (once per module)."""
    with pytest.MonkeyPatch.context() as env, mock_aws():
        for name, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                            "AWS_DEFAULT_REGION": REGION, "AWS_REGION": REGION}.items():
            env.setenv(name, value)
        env.delenv("AWS_ENDPOINT_URL", raising=False)
        env.delenv("AWS_PROFILE", raising=False)
        yield _deploy(synthesized)


def _deploy(synthesized: Synthesized) -> dict[str, str]:
    assert publish_assets(synthesized.outdir, synthesized.stack.artifact_id + ".assets.json")
    cloudformation = boto3.client("cloudformation", region_name=REGION)
    cloudformation.create_stack(
        StackName=STACK, TemplateBody=synthesized.template_path.read_text(),
        Capabilities=["CAPABILITY_IAM"])
    stack = cloudformation.describe_stacks(StackName=STACK)["Stacks"][0]
    assert stack["StackStatus"] == "CREATE_COMPLETE"
    return {o["OutputKey"]: o["OutputValue"] for o in stack["Outputs"]}


def settings_from_outputs(outputs: dict[str, str], pools: tuple[str, ...]) -> Settings:
    tables = {f"{t.role}_table": outputs[f"{t.role.title()}Table"] for t in TABLES}
    values: dict[str, Any] = {
        **tables, "queue_prefix": outputs["QueuePrefix"],
        "queue_urls": json.loads(outputs["QueueUrls"]), "pools": pools, "region": REGION,
    }
    return Settings(**values)


def test_the_deployed_stack_carries_a_job_from_submission_to_success(
        synthesized: Synthesized, deployed: dict[str, str]) -> None:
    lambda_ = boto3.client("lambda", region_name=REGION)
    mappings = lambda_.list_event_source_mappings()["EventSourceMappings"]
    assert len(mappings) == 3
    assert all(m["FunctionResponseTypes"] == ["ReportBatchItemFailures"] for m in mappings)
    for mapping in mappings:
        # moto would try to invoke the function in Docker on every send; we are the worker.
        lambda_.update_event_source_mapping(UUID=mapping["UUID"], Enabled=False)

    pools = tuple(pool.name for pool in synthesized.config.pools)
    settings = settings_from_outputs(deployed, pools)
    registry = TaskRegistry()

    @registry.task("double")
    def double(payload: dict[str, int], ctx: Any) -> dict[str, int]:
        return {"value": payload["value"] * 2}

    app = Leasehold.from_settings(settings, registry=registry)
    job = submit(app, JobSpec(task="double", payload={"value": 21})).job
    url = app.queues.url("default", "normal")
    # The queue the job went through is the stack's KMS-encrypted queue, not a local one.
    attributes = app.clients.sqs.get_queue_attributes(
        QueueUrl=url, AttributeNames=["KmsMasterKeyId", "RedrivePolicy"])["Attributes"]
    assert attributes["KmsMasterKeyId"]
    assert json.loads(attributes["RedrivePolicy"])["maxReceiveCount"] == 5

    messages = app.queues.receive(url)
    assert len(messages) == 1
    assert consume(Worker(app), messages) == {"processed": 1, "failed": 0}
    done = app.store.get(job.job_id)
    assert done.state is JobState.SUCCEEDED
    assert done.result == {"value": 42}
    assert app.queues.receive(url) == []


def test_the_deployed_tables_have_the_keys_and_indexes_of_the_definitions(
        synthesized: Synthesized, deployed: dict[str, str]) -> None:
    dynamodb = boto3.client("dynamodb", region_name=REGION)
    settings = settings_from_outputs(deployed, ("default",))
    for definition in TABLES:
        expected = definition.create_table_kwargs(settings)
        table = dynamodb.describe_table(TableName=expected["TableName"])["Table"]
        assert table["KeySchema"] == expected["KeySchema"]
        indexes = {i["IndexName"]: (i["KeySchema"], i["Projection"])
                   for i in table.get("GlobalSecondaryIndexes", [])}
        assert indexes == {i["IndexName"]: (i["KeySchema"], i["Projection"])
                           for i in expected.get("GlobalSecondaryIndexes", [])}
