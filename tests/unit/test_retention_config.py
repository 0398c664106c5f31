"""``retentionDays`` goes from CDK context to every function's environment (issue 25)."""

from __future__ import annotations

import pytest

from leasehold.cdk.config import LeaseholdConfig
from leasehold.errors import ValidationError
from leasehold.settings import Settings


def test_retention_days_reaches_the_functions_and_defaults_to_30() -> None:
    assert LeaseholdConfig().settings().retention_days == 30
    config = LeaseholdConfig.from_context({"retentionDays": "90"}.get)
    env = config.settings().to_env()
    assert env["LEASEHOLD_RETENTION_DAYS"] == "90"
    assert Settings.from_env(env).retention_days == 90
    assert LeaseholdConfig.from_context({"retentionDays": "0"}.get).retention_days == 0


def test_a_negative_retention_is_refused_naming_the_setting() -> None:
    with pytest.raises(ValueError, match="retentionDays"):
        LeaseholdConfig.from_context({"retentionDays": "-1"}.get)
    with pytest.raises(ValidationError, match="LEASEHOLD_RETENTION_DAYS"):
        Settings.from_env({"LEASEHOLD_RETENTION_DAYS": "-3"})
