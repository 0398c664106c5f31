"""``leasehold dev`` on AWS's DynamoDB Local: ``--endpoint URL --provision``, started twice,
and ``--dynamodb local``, which starts DynamoDB Local itself (issue 46).

The second start crashed (``ValidationException: TimeToLive is already enabled``), as it
would on AWS: provisioning enabled TTL again on tables that had it. ``--endpoint`` sends
every service to one URL, so a router sends DynamoDB to DynamoDB Local and SQS and
EventBridge to the embedded emulator (moto).
"""

from __future__ import annotations

import urllib.request
import uuid
from collections.abc import Iterator

import boto3
import pytest
from botocore.exceptions import ClientError

from leasehold.local import emulator
from tests import ddblocal

from .conftest import start_runtime

pytestmark = pytest.mark.e2e


@pytest.fixture
def router() -> Iterator[str]:
    sqs = emulator.start()
    routed = ddblocal.Router(dynamodb=ddblocal.shared().endpoint, rest=sqs.endpoint)
    try:
        yield routed.endpoint
    finally:
        routed.stop()
        sqs.stop()


def test_dev_with_provision_on_dynamodb_local_starts_twice_and_keeps_its_jobs(
        router: str) -> None:
    prefix = "e" + uuid.uuid4().hex[:8]
    env = {f"LEASEHOLD_{role}_TABLE": f"{prefix}-{role.lower()}"
           for role in ("JOBS", "SCHEDULES", "TENANTS", "COORDINATION", "WORKFLOWS")}
    env.update(LEASEHOLD_QUEUE_PREFIX=prefix, AWS_ACCESS_KEY_ID="testing",
               AWS_SECRET_ACCESS_KEY="testing", AWS_DEFAULT_REGION="us-east-1")
    kept = None
    for run in ("first", "second"):
        runtime = start_runtime("--endpoint", router, "--provision", "--workers", "1", env=env)
        try:
            job = runtime.submit({"task": "echo", "payload": run})["job_id"]
            assert runtime.wait_for([job])[job]["state"] == "SUCCEEDED"
            if kept is not None:  # the tables were DynamoDB Local's, kept across the starts
                assert runtime.job(kept)["state"] == "SUCCEEDED"
            kept = job
        finally:
            code = runtime.stop()
        assert code == 0, "".join(runtime.output[-30:])


def test_dev_with_dynamodb_local_runs_jobs_on_dynamodb_local_and_stops_it() -> None:
    runtime = start_runtime("--dynamodb", "local", "--workers", "1")
    try:
        [line] = [line for line in runtime.output if line.startswith("DynamoDB: ")]
        endpoint = line.split()[-1]
        job = runtime.submit({"task": "echo", "payload": "on DynamoDB Local"})["job_id"]
        assert runtime.wait_for([job])[job]["state"] == "SUCCEEDED"
        # DynamoDB behind that endpoint is AWS's DynamoDB Local: it refuses a number of 39
        # digits, which the embedded emulator (moto) stores (test_ddblocal.py pins both).
        dynamodb = boto3.client("dynamodb", endpoint_url=endpoint, region_name="us-east-1",
                                aws_access_key_id="testing", aws_secret_access_key="testing")
        table = "probe-" + uuid.uuid4().hex[:8]
        dynamodb.create_table(TableName=table, BillingMode="PAY_PER_REQUEST",
                              KeySchema=[{"AttributeName": "k", "KeyType": "HASH"}],
                              AttributeDefinitions=[{"AttributeName": "k", "AttributeType": "S"}])
        with pytest.raises(ClientError, match=r"ValidationException|[Nn]umber"):
            dynamodb.put_item(TableName=table, Item={"k": {"S": "x"}, "n": {"N": "1" * 39}})
    finally:
        code = runtime.stop()
    assert code == 0, "".join(runtime.output[-30:])
    # It stopped what it started: nothing answers at the endpoint any more.
    with pytest.raises(OSError):
        urllib.request.urlopen(endpoint, timeout=2)
