"""AWS targets: an allowed action called with boto3 under the targets role, served locally
by moto (the embedded emulator is moto's server); an action the deployment does not list is
refused at submission."""

from __future__ import annotations

import json

import pytest

from leasehold.core.spec import JobSpec
from leasehold.core.states import JobState
from leasehold.errors import ValidationError
from leasehold.lifecycle.app import Leasehold
from leasehold.lifecycle.submission import submit
from tests.conftest import MakeApp
from tests.integration.helpers import deliver

ROLE = "arn:aws:iam::123456789012:role/lh-targets"


@pytest.fixture
def app(make_app: MakeApp) -> Leasehold:
    # moto's STS answers AssumeRole on the targets role (as ``leasehold dev``'s does).
    return make_app(targets_role_arn=ROLE, targets={"aws_targets": [
        {"action": "sqs:SendMessage", "resources": ["*"]},
        {"action": "sns:Publish", "resources": ["*"]}]})


def test_sqs_send_message_and_sns_publish_run_against_the_emulator(app: Leasehold) -> None:
    sqs, sns = app.clients.client("sqs"), app.clients.client("sns")
    inbox = sqs.create_queue(QueueName="target-inbox")["QueueUrl"]
    topic = sns.create_topic(Name="target-topic")["TopicArn"]
    fanout = sqs.create_queue(QueueName="target-fanout")["QueueUrl"]
    fanout_arn = sqs.get_queue_attributes(QueueUrl=fanout, AttributeNames=["QueueArn"])[
        "Attributes"]["QueueArn"]
    sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=fanout_arn,
                  Attributes={"RawMessageDelivery": "true"})
    sent = submit(app, JobSpec(target={"aws": {
        "service": "sqs", "action": "SendMessage",
        "parameters": {"QueueUrl": inbox, "MessageBody": "hello from a target"}}})).job
    published = submit(app, JobSpec(target={"aws": {
        "service": "sns", "action": "Publish",
        "parameters": {"TopicArn": topic, "Message": "published by a target"}}})).job
    deliver(app)
    for job in (sent, published):
        done = app.store.get(job.job_id)
        assert done.state is JobState.SUCCEEDED
        assert "MessageId" in json.loads(done.result_json or "{}")
        assert "ResponseMetadata" not in (done.result_json or "")
    [message] = sqs.receive_message(QueueUrl=inbox)["Messages"]
    assert message["Body"] == "hello from a target"
    [fanned] = sqs.receive_message(QueueUrl=fanout)["Messages"]
    assert fanned["Body"] == "published by a target"


def test_an_action_failing_at_aws_fails_the_job_under_its_code_and_is_not_retried(
        app: Leasehold) -> None:
    job = submit(app, JobSpec(target={"aws": {
        "service": "sns", "action": "Publish",
        "parameters": {"TopicArn": "arn:aws:sns:us-east-1:123456789012:missing",
                       "Message": "x"}}})).job
    deliver(app)
    done = app.store.get(job.job_id)
    assert done.state is JobState.DEAD and done.error is not None
    assert done.error.type == "NotFound" and done.attempt == 1


def test_an_action_not_listed_is_refused_at_submission(app: Leasehold) -> None:
    with pytest.raises(ValidationError) as caught:
        submit(app, JobSpec(target={"aws": {"service": "sqs", "action": "DeleteQueue",
                                            "parameters": {"QueueUrl": "x"}}}))
    assert caught.value.field == "target.aws.action"
    assert "sqs:DeleteQueue is not allowed" in str(caught.value)
