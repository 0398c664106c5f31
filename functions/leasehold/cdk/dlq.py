"""Dead-letter queues for EventBridge targets and asynchronous Lambda invocations."""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from leasehold.cdk.nag import acknowledge


def event_dlq(scope: Construct, construct_id: str, *, of: str) -> sqs.Queue:
    """A DLQ for ``of`` (a rule's target and a function's async invocations).

    SQS-managed encryption, not the job CMK: these messages are events, not job data, and
    EventBridge and Lambda can write to an SSE-SQS queue without a key policy for their
    service principals. 14 days, the SQS maximum, so an operator has time to redrive.
    """
    queue = sqs.Queue(scope, construct_id, encryption=sqs.QueueEncryption.SQS_MANAGED,
                      enforce_ssl=True, retention_period=cdk.Duration.days(14))
    acknowledge(queue, "AwsSolutions-SQS3", f"This queue is itself the dead-letter queue of {of}.")
    acknowledge(queue, "Serverless-SQSRedrivePolicy",
                "This queue is itself a dead-letter queue; a DLQ of a DLQ only moves the "
                "problem. Its depth alarms instead.")
    return queue
