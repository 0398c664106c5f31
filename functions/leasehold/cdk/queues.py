"""SQS queues per pool x priority with their DLQs.

Built from :func:`leasehold.aws.definitions.queues`.

All job queues share one customer-managed KMS key with rotation on. Grants are explicit about
the KMS actions: ``Queue.grant_send_messages`` would add ``kms:ReEncrypt*`` and
``kms:GenerateDataKey*`` (wildcards); a producer to an SSE-KMS queue needs only
``kms:GenerateDataKey`` and ``kms:Decrypt``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from leasehold.aws.definitions import queues
from leasehold.cdk.config import PoolConfig
from leasehold.cdk.nag import acknowledge
from leasehold.settings import Settings

PRODUCER_KMS_ACTIONS = ("kms:GenerateDataKey", "kms:Decrypt")
#: How long SQS reuses a data key: fewer KMS calls (cost, throttling) for a bounded window.
DATA_KEY_REUSE = cdk.Duration.minutes(15)


class Queues(Construct):
    """Job queues and DLQs, encrypted with one rotating CMK, reachable over TLS only."""

    def __init__(self, scope: Construct, construct_id: str, *, settings: Settings,
                 pools: Iterable[PoolConfig], retention_days: int | None,
                 retain_data: bool) -> None:
        super().__init__(scope, construct_id)
        by_name = {pool.name: pool for pool in pools}
        removal = cdk.RemovalPolicy.RETAIN if retain_data else cdk.RemovalPolicy.DESTROY
        self.key = kms.Key(
            self, "Key", enable_key_rotation=True, removal_policy=removal,
            description=f"Encrypts the {settings.queue_prefix} job queues and their DLQs",
        )
        #: (pool, priority) -> queue
        self.work: dict[tuple[str, str], sqs.Queue] = {}
        self.dead: dict[tuple[str, str], sqs.Queue] = {}
        for definition in queues(settings):
            pool = by_name[definition.pool]
            retention = cdk.Duration.seconds(definition.retention_seconds)
            if retention_days is not None:
                retention = cdk.Duration.days(retention_days)
            common = {
                "encryption": sqs.QueueEncryption.KMS, "encryption_master_key": self.key,
                "data_key_reuse": DATA_KEY_REUSE, "enforce_ssl": True,
                "removal_policy": removal,
            }
            label = f"{definition.pool}-{definition.priority}"
            # Longer than the source's: a redriven message keeps its original enqueue time.
            dlq = sqs.Queue(self, f"{label}-dlq", queue_name=definition.dlq_name(settings),
                            retention_period=cdk.Duration.seconds(
                                definition.dlq_retention_seconds),
                            **common)  # type: ignore[arg-type]
            queue = sqs.Queue(
                self, label, queue_name=definition.name(settings), retention_period=retention,
                visibility_timeout=cdk.Duration.seconds(pool.visibility_timeout_seconds),
                dead_letter_queue=sqs.DeadLetterQueue(
                    max_receive_count=definition.max_receive_count, queue=dlq),
                **common,  # type: ignore[arg-type]
            )
            acknowledge(dlq, "Serverless-SQSRedrivePolicy",
                        "This queue is itself a dead-letter queue; a DLQ of a DLQ only moves the "
                        "problem. Its depth alarms instead.")
            key = (definition.pool, definition.priority)
            self.work[key] = queue
            self.dead[key] = dlq

    def all(self) -> list[sqs.Queue]:
        return [*self.work.values(), *self.dead.values()]

    def urls(self) -> Mapping[str, str]:
        """Queue name -> URL, for ``LEASEHOLD_QUEUE_URLS`` (no GetQueueUrl at run time)."""
        return {queue.queue_name: queue.queue_url for queue in self.all()}

    def pool_queues(self, pool: str) -> list[sqs.Queue]:
        return [queue for (name, _), queue in self.work.items() if name == pool]

    def grant_send(self, grantee: iam.IGrantable) -> None:
        """Send to every job queue and DLQ: retries, hand-offs, DEAD copies, redrives."""
        for queue in self.all():
            queue.grant(grantee, "sqs:SendMessage")
        self.key.grant(grantee, *PRODUCER_KMS_ACTIONS)

    def grant_inspect(self, grantee: iam.IGrantable) -> None:
        """Read queue depths (admission control and stats)."""
        for queue in self.all():
            queue.grant(grantee, "sqs:GetQueueAttributes")

    def grant_consume(self, grantee: iam.IGrantable, queues_: Iterable[sqs.Queue]) -> None:
        for queue in queues_:
            # Adds receive/delete/change-visibility and kms:Decrypt on the key, no wildcards.
            queue.grant_consume_messages(grantee)
