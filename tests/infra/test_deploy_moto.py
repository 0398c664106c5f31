"""The synthesized template, created in moto's CloudFormation, carries a job end to end.

moto creates the tables, queues, KMS key, roles, functions and event source mappings from the
template (types moto does not model, such as alarms and the API stage, are skipped by moto).
moto cannot run Lambda code without Docker, so the test pauses the event source mappings and
plays the worker Lambda's part with the library's own consumer, against the stack's resources.
moto does create the relay's mapping on the jobs table's stream, but ignores its ``Enabled``
and invokes the function on every write to the table; the module never lets it start a
container, and where a test needs the relay, :func:`relay_in_process` runs the relay's handler
in-process at that point instead, in the deployed function's environment, with the records
moto delivers.
"""

from __future__ import annotations

import io
import json
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws
from moto.awslambda.models import LambdaFunction

from infra.stack import API_HANDLER
from leasehold.aws.definitions import TABLES
from leasehold.cdk.monitoring import NAMESPACE, SERVICE
from leasehold.cdk.relay import RELAY_HANDLER
from leasehold.cdk.triggers import TRIGGER_HANDLER
from leasehold.compose import compose
from leasehold.core.registry import TaskRegistry
from leasehold.core.spec import JobSpec
from leasehold.core.states import JobState
from leasehold.events import triggers
from leasehold.events.publishing import SOURCE as JOB_EVENT_SOURCE
from leasehold.events.publishing import event_id
from leasehold.handlers import api as api_handler
from leasehold.handlers import relay as relay_handler
from leasehold.handlers import telemetry
from leasehold.handlers import trigger as trigger_handler
from leasehold.lifecycle.consumer import consume
from leasehold.lifecycle.submission import submit
from leasehold.lifecycle.worker import Worker
from leasehold.settings import Settings
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
        # moto invokes the relay on every write to the jobs table (it ignores Enabled on a
        # stream mapping); never in a container here, even where Docker is at hand.
        env.setattr(LambdaFunction, "_invoke_lambda", _not_run)
        yield _deploy(synthesized)


def _not_run(function: LambdaFunction, event: Any = None) -> tuple[str, bool, str]:
    """moto's Lambda invocation, as a failure that ran nothing (see :func:`relay_in_process`)."""
    return "not run: these tests start no Lambda container", True, ""


def for_moto(template: dict[str, Any]) -> dict[str, Any]:
    """The template as moto 5.2's CloudFormation can read it, meaning the same on AWS.

    Two encodings change, nothing else:
    - moto parses an ``AWS::Events::Archive``'s ``EventPattern`` as a JSON string (the form the
      CreateArchive API takes); CloudFormation takes only an object there, as CDK writes it
      (aws-cloudformation/cloudformation-coverage-roadmap#1414).
    - moto's event bus has no physical id, so ``Ref`` to it yields moto's object instead of the
      name; on AWS ``Ref`` and ``Fn::GetAtt [bus, Name]`` are both the bus name.
    """
    template = json.loads(json.dumps(template))
    buses = {logical for logical, resource in template["Resources"].items()
             if resource["Type"] == "AWS::Events::EventBus"}

    def rewrite(value: Any) -> Any:
        if isinstance(value, dict):
            if set(value) == {"Ref"} and value["Ref"] in buses:
                return {"Fn::GetAtt": [value["Ref"], "Name"]}
            return {key: rewrite(item) for key, item in value.items()}
        if isinstance(value, list):
            return [rewrite(item) for item in value]
        return value

    template = rewrite(template)
    for resource in template["Resources"].values():
        if resource["Type"] == "AWS::Events::Archive":
            properties = resource["Properties"]
            properties["EventPattern"] = json.dumps(properties["EventPattern"])
    return template


def _deploy(synthesized: Synthesized) -> dict[str, str]:
    assert publish_assets(synthesized.outdir, synthesized.stack.artifact_id + ".assets.json")
    cloudformation = boto3.client("cloudformation", region_name=REGION)
    cloudformation.create_stack(
        StackName=STACK, TemplateBody=json.dumps(for_moto(synthesized.raw)),
        Capabilities=["CAPABILITY_IAM"])
    stack = cloudformation.describe_stacks(StackName=STACK)["Stacks"][0]
    assert stack["StackStatus"] == "CREATE_COMPLETE"
    # moto would try to invoke the worker in Docker on every send; the tests play the worker.
    lambda_ = boto3.client("lambda", region_name=REGION)
    for mapping in lambda_.list_event_source_mappings()["EventSourceMappings"]:
        lambda_.update_event_source_mapping(UUID=mapping["UUID"], Enabled=False)
    return {o["OutputKey"]: o["OutputValue"] for o in stack["Outputs"]}


def settings_from_outputs(outputs: dict[str, str], pools: tuple[str, ...]) -> Settings:
    tables = {f"{t.role}_table": outputs[f"{t.role.title()}Table"] for t in TABLES}
    values: dict[str, Any] = {
        **tables, "queue_prefix": outputs["QueuePrefix"],
        "queue_urls": json.loads(outputs["QueueUrls"]), "pools": pools, "region": REGION,
    }
    return Settings(**values)



def observe_job_events(bus: str, name: str) -> str:
    """A queue that receives every job event put on ``bus`` (a rule named ``name`` too)."""
    events = boto3.client("events", region_name=REGION)
    sqs = boto3.client("sqs", region_name=REGION)
    observed = sqs.create_queue(QueueName=name)["QueueUrl"]
    events.put_rule(Name=name, EventBusName=bus,
                    EventPattern=json.dumps({"source": [JOB_EVENT_SOURCE]}))
    events.put_targets(Rule=name, EventBusName=bus, Targets=[{
        "Id": "observer", "Arn": sqs.get_queue_attributes(
            QueueUrl=observed, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]}])
    return str(observed)

def test_the_deployed_stack_carries_a_job_from_submission_to_success(
        synthesized: Synthesized, deployed: dict[str, str]) -> None:
    lambda_ = boto3.client("lambda", region_name=REGION)
    mappings = [m for m in lambda_.list_event_source_mappings()["EventSourceMappings"]
                if m["EventSourceArn"].startswith("arn:aws:sqs:")]
    assert len(mappings) == 3
    assert all(m["FunctionResponseTypes"] == ["ReportBatchItemFailures"] for m in mappings)
    assert all(m["State"] == "Disabled" for m in mappings)  # by _deploy: we are the worker

    pools = tuple(pool.name for pool in synthesized.config.pools)
    settings = settings_from_outputs(deployed, pools)
    registry = TaskRegistry()

    @registry.task("double")
    def double(payload: dict[str, int], ctx: Any) -> dict[str, int]:
        return {"value": payload["value"] * 2}

    app = compose(settings, registry=registry)
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



@pytest.fixture(autouse=True)
def _no_metrics_from_earlier_tests() -> Iterator[None]:
    """Powertools' metrics buffer is one per process: a test elsewhere in this worker that
    counted a submission outside a handler (no flush) would add its values to the ones this
    module reads from a handler's output. In Lambda every count is flushed by its handler."""
    telemetry.metrics.clear_metrics()
    yield
    telemetry.metrics.clear_metrics()

@dataclass
class LambdaContext:
    function_name: str = "leasehold-trigger"
    memory_limit_in_mb: int = 512
    invoked_function_arn: str = "arn:aws:lambda:us-east-1:123456789012:function:trigger"
    aws_request_id: str = "req-1"


@dataclass
class RelayRun:
    #: Environment the relay runs with on top of its deployed one (empty: as deployed).
    overrides: dict[str, str]
    #: Every AWS operation the relay's code called, as ``service:Operation`` (IAM's names).
    calls: set[str]
    #: The stream records moto delivered to it.
    records: int = 0


@pytest.fixture
def relay_in_process(monkeypatch: pytest.MonkeyPatch) -> Iterator[RelayRun]:
    """Run the deployed relay's handler where moto would start its container.

    moto's stream mapping hands the relay the table's new records (the Lambda event shape,
    ``Records`` with both images) synchronously on each write.
    """
    run = RelayRun(overrides={}, calls=set())

    def record(client: Any) -> None:
        prefix = client.meta.service_model.signing_name
        client.meta.events.register("before-call", lambda model, **_: run.calls.add(
            f"{prefix}:{model.name}"))

    def invoke(function: LambdaFunction, event: Any = None) -> tuple[str, bool, str]:
        if function.handler != RELAY_HANDLER:
            return _not_run(function, event)
        with pytest.MonkeyPatch.context() as env:
            for name, value in {**function.environment_vars, **run.overrides}.items():
                env.setenv(name, value)
            relay_handler._app.cache_clear()
            relay_handler._sink.cache_clear()
            relay_handler._app().clients.add_hook(record)
            run.records += len(event["Records"])
            try:
                result = relay_handler.handler(event, LambdaContext(
                    function_name=function.function_name))
            finally:
                relay_handler._app.cache_clear()
                relay_handler._sink.cache_clear()
        return json.dumps(result), False, ""

    monkeypatch.setattr(LambdaFunction, "_invoke_lambda", invoke)
    yield run


def function_environment(handler: str) -> dict[str, str]:
    """The environment moto's Lambda holds for the deployed function running ``handler``."""
    functions = boto3.client("lambda", region_name=REGION).list_functions()["Functions"]
    (function,) = [f for f in functions if f["Handler"] == handler]
    return dict(function["Environment"]["Variables"])


def emf_metrics(output: str) -> dict[str, tuple[str, list[list[str]], dict[str, Any]]]:
    """EMF metric name -> (namespace, dimension sets, blob) from a function's stdout."""
    found = {}
    for line in output.splitlines():
        if line.startswith("{") and '"_aws"' in line:
            blob = json.loads(line)
            for directive in blob["_aws"]["CloudWatchMetrics"]:
                for metric in directive["Metrics"]:
                    found[metric["Name"]] = (directive["Namespace"], directive["Dimensions"],
                                             blob)
    return found


def drain(sqs: Any, url: str) -> list[dict[str, Any]]:
    bodies = []
    while messages := sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages"):
        for message in messages:
            bodies.append(json.loads(message["Body"]))
            sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    return bodies


def test_a_user_event_reaches_the_trigger_whose_job_the_stream_relay_publishes_to_the_bus(
        synthesized: Synthesized, deployed: dict[str, str], monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str], relay_in_process: RelayRun) -> None:
    """Bus, trigger rule, archive and the trigger function's environment, as moto created them.

    moto cannot deliver to Lambda targets (it raises NotImplementedError), so the test swaps the
    trigger rule's Lambda target for an SQS queue to see what the rule delivers, and calls the
    trigger handler with that event, in the deployed function's environment. Which events
    match is moto's pattern matcher applying the template's pattern; the template tests pin
    the pattern itself.
    """
    events = boto3.client("events", region_name=REGION)
    sqs = boto3.client("sqs", region_name=REGION)
    bus = deployed["EventBusName"]
    env = function_environment(TRIGGER_HANDLER)
    assert env["LEASEHOLD_EVENT_BUS"] == bus
    (rule,) = [r for r in events.list_rules(EventBusName=bus)["Rules"]
               if not r["Name"].startswith("Events-Archive-")]
    (target,) = events.list_targets_by_rule(Rule=rule["Name"], EventBusName=bus)["Targets"]
    assert target["Arn"].endswith(":" + next(
        f["FunctionName"] for f in boto3.client("lambda", region_name=REGION)
        .list_functions()["Functions"] if f["Handler"] == TRIGGER_HANDLER))
    delivered = sqs.create_queue(QueueName="delivered-to-trigger")["QueueUrl"]
    job_events = sqs.create_queue(QueueName="job-events")["QueueUrl"]

    def arn(url: str) -> str:
        return sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])[
            "Attributes"]["QueueArn"]

    events.remove_targets(Rule=rule["Name"], EventBusName=bus, Ids=[target["Id"]])
    events.put_targets(Rule=rule["Name"], EventBusName=bus,
                       Targets=[{"Id": "observer", "Arn": arn(delivered)}])
    events.put_rule(Name="observe-jobs", EventBusName=bus,
                    EventPattern=json.dumps({"source": [JOB_EVENT_SOURCE]}))
    events.put_targets(Rule="observe-jobs", EventBusName=bus,
                       Targets=[{"Id": "observer", "Arn": arn(job_events)}])

    for name, value in env.items():
        monkeypatch.setenv(name, value)
    # As deployed only terminal states are published; every state here, so that the job's
    # QUEUED event shows that the trigger rule does not take job events back.
    assert env["LEASEHOLD_PUBLISH"] == "terminal"
    monkeypatch.setenv("LEASEHOLD_PUBLISH", "all")
    relay_in_process.overrides["LEASEHOLD_PUBLISH"] = "all"
    # The trigger publishes nothing itself: the relay publishes from the jobs table's stream.
    assert env["LEASEHOLD_EVENTS_FROM"] == "stream"
    trigger_handler._app.cache_clear()
    try:
        app = trigger_handler._app()
        trigger = triggers.create(app, {"name": "orders", "task": "echo",
                                        "pattern": {"source": ["shop"]},
                                        "input_path": "$.detail"}, tenant="acme")
        events.put_events(Entries=[{"Source": "shop", "DetailType": "Order Placed",
                                    "Detail": json.dumps({"order": 7}), "EventBusName": bus}])
        (event,) = drain(sqs, delivered)
        capsys.readouterr()
        result = trigger_handler.handler(event, LambdaContext())
        output = capsys.readouterr().out
    finally:
        trigger_handler._app.cache_clear()

    (job_id,) = result["submitted"]
    job = app.store.get(job_id)
    assert (job.tenant, job.payload, job.extra["trigger_id"]) == (
        "acme", {"order": 7}, trigger.trigger_id)
    # The job's own state event went to the bus (from the committed row, through the relay),
    # and the trigger rule did not take it back.
    published = drain(sqs, job_events)
    assert [(e["detail-type"], e["detail"]["job_id"], e["detail"]["event_id"])
            for e in published] == [("Job Queued", job_id, event_id(job))]
    assert drain(sqs, delivered) == []
    # The archive kept the user event only.
    (archive,) = events.list_archives(EventSourceArn=events.describe_event_bus(
        Name=bus)["Arn"])["Archives"]
    assert archive["EventCount"] == 1
    # The function's metrics, named and dimensioned as the dashboard charts them.
    namespace, dimensions, blob = emf_metrics(output)["JobsSubmitted"]
    assert (namespace, blob["service"], blob["JobsSubmitted"]) == (
        NAMESPACE, SERVICE, [1.0] if isinstance(blob["JobsSubmitted"], list) else 1.0)
    assert ["service"] in dimensions


def test_the_deployed_api_function_submits_a_job_publishes_only_outcomes_and_counts_it(
        synthesized: Synthesized, deployed: dict[str, str], monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str], relay_in_process: RelayRun) -> None:
    """The API handler in the deployed API function's environment, with a SigV4 caller; the
    relay, as deployed, sees the new row and publishes nothing for it."""
    sqs = boto3.client("sqs", region_name=REGION)
    bus = deployed["EventBusName"]
    observed = observe_job_events(bus, "api-job-events")
    for name, value in function_environment(API_HANDLER).items():
        monkeypatch.setenv(name, value)
    request = {
        "resource": "/jobs", "path": "/jobs", "httpMethod": "POST",
        "headers": {"Content-Type": "application/json"}, "multiValueHeaders": {},
        "queryStringParameters": None, "pathParameters": None, "isBase64Encoded": False,
        "body": json.dumps({"task": "echo", "payload": {"n": 1}}),
        "requestContext": {"stage": "v1", "httpMethod": "POST", "path": "/v1/jobs",
                           "requestId": "req-1", "resourcePath": "/jobs",
                           "identity": {"userArn": "arn:aws:iam::123456789012:user/acme"}},
    }
    api_handler._app.cache_clear()
    try:
        capsys.readouterr()
        response = api_handler.handler(request, LambdaContext(function_name="leasehold-api"))
        output = capsys.readouterr().out
    finally:
        api_handler._app.cache_clear()
    assert response["statusCode"] in (201, 202), response
    assert json.loads(response["body"])["job_id"]
    # As deployed (publish=terminal) a queued job is no event yet; its outcome will be.
    assert function_environment(API_HANDLER)["LEASEHOLD_PUBLISH"] == "terminal"
    assert relay_in_process.records and relay_in_process.calls == set()  # nothing to put
    assert drain(sqs, observed) == []
    namespace, dimensions, blob = emf_metrics(output)["JobsSubmitted"]
    assert (namespace, blob["service"]) == (NAMESPACE, SERVICE)
    assert ["service"] in dimensions


def test_the_deployed_relay_publishes_a_finished_jobs_outcome_once_from_the_stream(
        synthesized: Synthesized, deployed: dict[str, str], monkeypatch: pytest.MonkeyPatch,
        relay_in_process: RelayRun) -> None:
    """A job run by a worker in the deployed worker's environment: its outcome reaches the bus
    once, made by the relay from the committed row (with the row's ``event_id``), and the
    worker itself published nothing."""
    lambda_ = boto3.client("lambda", region_name=REGION)
    sqs = boto3.client("sqs", region_name=REGION)
    settings = settings_from_outputs(deployed, ("default",))
    stream = boto3.client("dynamodb", region_name=REGION).describe_table(
        TableName=settings.jobs_table)["Table"]["LatestStreamArn"]
    (mapping,) = [m for m in lambda_.list_event_source_mappings()["EventSourceMappings"]
                  if m["EventSourceArn"] == stream]
    assert mapping["FunctionArn"].endswith(":" + next(
        f["FunctionName"] for f in lambda_.list_functions()["Functions"]
        if f["Handler"] == RELAY_HANDLER))
    assert (mapping["FunctionResponseTypes"], mapping["BisectBatchOnFunctionError"],
            mapping["StartingPosition"]) == (["ReportBatchItemFailures"], True, "TRIM_HORIZON")
    dlq = mapping["DestinationConfig"]["OnFailure"]["Destination"]
    assert sqs.get_queue_url(QueueName=dlq.rsplit(":", 1)[1])  # the stack created it

    bus = deployed["EventBusName"]
    observed = observe_job_events(bus, "relay-job-events")
    worker_env = function_environment("leasehold.handlers.worker.handler")
    assert worker_env["LEASEHOLD_EVENTS_FROM"] == "stream"
    for name, value in worker_env.items():
        monkeypatch.setenv(name, value)
    registry = TaskRegistry()

    @registry.task("triple")
    def triple(payload: dict[str, int], ctx: Any) -> dict[str, int]:
        return {"value": payload["value"] * 3}

    app = compose(registry=registry)
    # High priority: the other tests leave their jobs in the normal queue.
    job = submit(app, JobSpec(task="triple", payload={"value": 5}, priority="high")).job
    messages = app.queues.receive(app.queues.url("default", "high"))
    assert consume(Worker(app), messages) == {"processed": 1, "failed": 0}
    assert app.store.get(job.job_id).state is JobState.SUCCEEDED

    published = drain(sqs, observed)
    # As deployed (publish=terminal): the outcome only, once, from the relay.
    assert [(e["detail-type"], e["detail"]["job_id"], e["detail"]["event_id"])
            for e in published] == [
        ("Job Succeeded", job.job_id, event_id(app.store.get(job.job_id)))]
    # Building its application and relaying take nothing but PutEvents, all its role allows
    # beyond the stream reads Lambda makes for it (tests/infra/test_relay.py).
    assert relay_in_process.calls == {"events:PutEvents"}
