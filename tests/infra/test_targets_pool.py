"""Jobs with no code run on a Python pool, never an external one (issue 43, defect 7): the
targets pool defaults to the first Python pool, and a deployment whose pools are all
external is refused at synth when it configures targets."""

from __future__ import annotations

import os

import aws_cdk as cdk
import pytest

from leasehold.cdk import Leasehold
from leasehold.cdk.config import LeaseholdConfig, PoolConfig

os.environ.setdefault("JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION", "1")
pytestmark = pytest.mark.infra


IMAGES = PoolConfig(name="images", kind="external", tasks=("resize",))


def synth(config: LeaseholdConfig) -> None:
    stack = cdk.Stack(cdk.App(), "T", env=cdk.Environment(account="123456789012",
                                                          region="eu-west-1"))
    Leasehold(stack, "Jobs", config=config)


def test_targets_with_no_python_pool_are_refused_at_synth() -> None:
    with pytest.raises(ValueError, match="every pool is external"):
        synth(LeaseholdConfig(bundling="source", pools=(IMAGES,),
                              http_hosts={"api.partner.example": {"concurrency": 4}}))
    with pytest.raises(ValueError, match="external pool"):
        synth(LeaseholdConfig(bundling="source", pools=(IMAGES, PoolConfig(name="default")),
                              targets_pool="images"))


def test_the_targets_pool_defaults_to_the_first_python_pool_and_reaches_the_functions() -> None:
    config = LeaseholdConfig(pools=(IMAGES, PoolConfig(name="default"),
                                    PoolConfig(name="batch")))
    assert config.targets_runner() == config.pool("default")
    assert config.settings().targets_runner() == "default"
    chosen = LeaseholdConfig.from_context({"targetsPool": "batch", "pools": [
        {"name": "images", "kind": "external", "tasks": ["resize"]}, {"name": "default"},
        {"name": "batch"}]}.get)
    assert chosen.settings().to_env()["LEASEHOLD_TARGETS_POOL"] == "batch"
