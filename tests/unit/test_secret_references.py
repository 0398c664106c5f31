"""How a pool's secret reference is spelled (``PoolConfig.secrets``, ``LEASEHOLD_SECRETS``):
one table, read by the construct (grants) and the worker (reads) alike."""

from __future__ import annotations

import json

import pytest

from leasehold.aws.secrets import SECRETS_VAR, SecretReference, reference, references
from leasehold.errors import ValidationError

SM_ARN = "arn:aws:secretsmanager:eu-west-1:111122223333:secret:billing/stripe-AbCdEf"
SSM_ARN = "arn:aws:ssm:eu-west-1:111122223333:parameter/billing/db-password"


@pytest.mark.parametrize(("value", "expected"), [
    ("billing/stripe", SecretReference("secretsmanager", "billing/stripe")),
    (SM_ARN, SecretReference("secretsmanager", SM_ARN)),
    ("ssm:/billing/db-password", SecretReference("ssm", "/billing/db-password")),
    ("ssm:plain-name", SecretReference("ssm", "plain-name")),
    (SSM_ARN, SecretReference("ssm", SSM_ARN)),
    ("  billing/stripe ", SecretReference("secretsmanager", "billing/stripe")),
])
def test_a_reference_names_its_store_and_what_is_read(
        value: str, expected: SecretReference) -> None:
    assert reference(value) == expected


@pytest.mark.parametrize(("value", "message"), [
    ("", "a secret reference is empty"),
    ("ssm:", "names no SSM parameter"),
    ("arn:aws:s3:::bucket/key", "neither a Secrets Manager secret nor an SSM parameter"),
])
def test_a_reference_that_names_nothing_readable_is_refused(value: str, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        reference(value)


def test_the_environment_holds_references_by_variable_name() -> None:
    env = {SECRETS_VAR: json.dumps({"API_KEY": "billing/stripe", "DB": "ssm:/db"})}
    assert references(env) == {"API_KEY": SecretReference("secretsmanager", "billing/stripe"),
                               "DB": SecretReference("ssm", "/db")}
    assert references({}) == {}
    with pytest.raises(ValidationError, match="expected NAME: reference"):
        references({SECRETS_VAR: json.dumps({"1BAD": "x"})})
