"""The tables and queues in the template are the ones :mod:`leasehold.aws.definitions` describes.

The local runtime creates its resources from ``create_table_kwargs`` and ``queues(settings)``;
comparing the template against the same values proves the two can never drift apart.
"""

from __future__ import annotations

from typing import Any

import pytest
from aws_cdk.assertions import Match

from leasehold.aws.definitions import TABLES, queues
from tests.infra.conftest import Synthesized

pytestmark = pytest.mark.infra


def _table_by_name(synthesized: Synthesized, name: str) -> dict[str, Any]:
    tables = [r["Properties"] for r in synthesized.resources("AWS::DynamoDB::Table").values()
              if r["Properties"]["TableName"] == name]
    assert len(tables) == 1, f"expected one table named {name}"
    return tables[0]


def test_every_table_in_the_template_is_the_definition_the_local_runtime_creates(
        synthesized: Synthesized) -> None:
    settings = synthesized.config.settings()
    assert len(synthesized.resources("AWS::DynamoDB::Table")) == len(TABLES)
    for definition in TABLES:
        expected = definition.create_table_kwargs(settings)
        actual = _table_by_name(synthesized, expected["TableName"])
        assert actual["BillingMode"] == expected["BillingMode"]
        assert actual["KeySchema"] == expected["KeySchema"]
        assert sorted(actual["AttributeDefinitions"], key=lambda a: a["AttributeName"]) == \
            expected["AttributeDefinitions"]
        assert actual.get("GlobalSecondaryIndexes", []) == \
            expected.get("GlobalSecondaryIndexes", [])
        if definition.ttl_attribute:
            assert actual["TimeToLiveSpecification"] == {
                "AttributeName": definition.ttl_attribute, "Enabled": True}
        else:
            assert "TimeToLiveSpecification" not in actual


def test_the_jobs_table_is_version_2_keyed_by_home_and_id_with_a_sparse_listing_index(
        synthesized: Synthesized) -> None:
    """Issue 46: a new table (a key schema cannot change in place), keyed so that a tenant's
    plain jobs are listed from the table itself; ``by_tenant_shard`` only for derived ids."""
    settings = synthesized.config.settings()
    assert settings.jobs_table == f"{synthesized.config.prefix}-jobs-v2"
    jobs = _table_by_name(synthesized, settings.jobs_table)
    assert jobs["KeySchema"] == [{"AttributeName": "pk", "KeyType": "HASH"},
                                 {"AttributeName": "job_id", "KeyType": "RANGE"}]
    listing = next(i for i in jobs["GlobalSecondaryIndexes"]
                   if i["IndexName"] == "by_tenant_shard")
    assert listing["Projection"] == {"ProjectionType": "KEYS_ONLY"}


def test_every_table_has_point_in_time_recovery_and_deletion_protection(
        synthesized: Synthesized) -> None:
    for resource in synthesized.resources("AWS::DynamoDB::Table").values():
        props = resource["Properties"]
        assert props["PointInTimeRecoverySpecification"] == {
            "PointInTimeRecoveryEnabled": True}
        assert props["DeletionProtectionEnabled"] is True
        assert resource["DeletionPolicy"] == "Retain"


def test_every_pool_and_priority_has_its_queue_and_dlq_as_defined(
        synthesized: Synthesized) -> None:
    settings = synthesized.config.settings()
    by_name = {r["Properties"].get("QueueName"): (logical, r["Properties"])
               for logical, r in synthesized.resources("AWS::SQS::Queue").items()}
    definitions = queues(settings)
    assert len(definitions) == 3 * len(synthesized.config.pools)
    for definition in definitions:
        dlq_logical, dlq = by_name[definition.dlq_name(settings)]
        _, queue = by_name[definition.name(settings)]
        assert queue["RedrivePolicy"] == {
            "deadLetterTargetArn": {"Fn::GetAtt": [dlq_logical, "Arn"]},
            "maxReceiveCount": definition.max_receive_count,
        }
        assert queue["MessageRetentionPeriod"] == definition.retention_seconds
        assert dlq["MessageRetentionPeriod"] == definition.dlq_retention_seconds
        pool = synthesized.config.pool(definition.pool)
        assert queue["VisibilityTimeout"] == 6 * pool.timeout_seconds


def test_job_queues_are_encrypted_with_one_rotating_customer_managed_key(
        synthesized: Synthesized) -> None:
    keys = synthesized.resources("AWS::KMS::Key")
    assert len(keys) == 1
    (key_logical, key), = keys.items()
    assert key["Properties"]["EnableKeyRotation"] is True
    settings = synthesized.config.settings()
    names = {d.name(settings) for d in queues(settings)} | \
        {d.dlq_name(settings) for d in queues(settings)}
    for resource in synthesized.resources("AWS::SQS::Queue").values():
        props = resource["Properties"]
        if props.get("QueueName") in names:
            assert props["KmsMasterKeyId"] == {"Fn::GetAtt": [key_logical, "Arn"]}
        else:  # the ticker/sweeper DLQ holds scheduled events only, no job data
            assert props["SqsManagedSseEnabled"] is True


def test_every_queue_denies_requests_without_tls(synthesized: Synthesized) -> None:
    queue_ids = set(synthesized.resources("AWS::SQS::Queue"))
    protected: set[str] = set()
    for policy in synthesized.resources("AWS::SQS::QueuePolicy").values():
        statements = policy["Properties"]["PolicyDocument"]["Statement"]
        if any(s["Effect"] == "Deny" and s["Condition"] == {
                "Bool": {"aws:SecureTransport": "false"}} for s in statements):
            protected |= {ref["Ref"] for ref in policy["Properties"]["Queues"]}
    assert protected == queue_ids


def test_sqs_visibility_is_at_least_six_times_the_timeout_of_the_lambda_consuming_it(
        synthesized: Synthesized) -> None:
    functions = synthesized.resources("AWS::Lambda::Function")
    queues_ = synthesized.resources("AWS::SQS::Queue")
    mappings = synthesized.resources("AWS::Lambda::EventSourceMapping")
    assert mappings
    for mapping in mappings.values():
        props = mapping["Properties"]
        queue_logical = props["EventSourceArn"]["Fn::GetAtt"][0]
        if queue_logical not in queues_:
            continue  # the relay's stream: no visibility timeout
        function = functions[props["FunctionName"]["Ref"]]["Properties"]
        assert queues_[queue_logical]["Properties"]["VisibilityTimeout"] >= \
            6 * function["Timeout"]


def test_template_names_match_the_settings_the_functions_read(
        synthesized: Synthesized) -> None:
    settings = synthesized.config.settings()
    expected = {k: v for k, v in settings.to_env().items() if k != "AWS_REGION"}
    synthesized.template.has_resource_properties("AWS::Lambda::Function", {
        "Handler": "leasehold.handlers.worker.handler",
        "Environment": {"Variables": Match.object_like({
            **expected,
            "LEASEHOLD_QUEUE_URL_BASE": Match.any_value(),
        })},
    })
