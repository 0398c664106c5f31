"""An external pool (issue 34): queues and DLQs, no consumer; its workers are principals
granted the worker routes, recorded for the API."""

from __future__ import annotations

import json
from pathlib import Path

import aws_cdk as cdk
import pytest
from aws_cdk import aws_iam as iam
from aws_cdk.assertions import Template

from leasehold.cdk import Leasehold, LeaseholdConfig
from leasehold.cdk.config import PoolConfig
from tests.infra.conftest import FEATURE_FLAGS, ROOT

pytestmark = pytest.mark.infra


def test_an_external_pool_has_queues_and_no_consumer(tmp_path: Path) -> None:
    app = cdk.App(outdir=str(tmp_path / "cdk.out"), context=FEATURE_FLAGS)
    stack = cdk.Stack(app, "App", env=cdk.Environment(account="123456789012",
                                                     region="eu-west-1"))
    config = LeaseholdConfig(bundling="source", waf=False, prefix="ext",
                             task_modules=("examples.tasks",), code=(str(ROOT / "examples"),),
                             pools=(
        PoolConfig(name="default"),
        PoolConfig(name="images", kind="external", tasks=("resize", "crop"))))
    jobs = Leasehold(stack, "Jobs", config=config)
    role = iam.Role(stack, "ImagesWorker",
                    assumed_by=iam.AccountPrincipal("123456789012"))
    jobs.external_pool("images").grant_lease(role)
    with pytest.raises(ValueError, match="external"):
        jobs.pool("images")
    template = Template.from_stack(stack)
    raw = template.to_json()
    names = [r["Properties"].get("QueueName") for r in raw["Resources"].values()
             if r["Type"] == "AWS::SQS::Queue"]
    assert {n for n in names if n and "images" in n} == {
        f"ext-images-{p}{dlq}" for p in ("high", "normal", "low") for dlq in ("", "-dlq")}
    functions = [r for r in raw["Resources"].values() if r["Type"] == "AWS::Lambda::Function"]
    assert not any("images" in json.dumps(f["Properties"].get("Description", ""))
                   for f in functions)
    mappings = json.dumps([r for r in raw["Resources"].values()
                           if r["Type"] == "AWS::Lambda::EventSourceMapping"])
    assert "images" not in mappings  # nothing consumes its queues
    api = next(f for f in functions if f["Properties"].get("Description") ==
               "Leasehold REST API")["Properties"]["Environment"]["Variables"]
    assert api["LEASEHOLD_EXTERNAL_TASKS"] == "images:resize,crop"
    assert "images" in api["LEASEHOLD_POOLS"].split(",")
    assert "ImagesWorker" in json.dumps(api["LEASEHOLD_WORKER_MAP"])
    policies = json.dumps([r for r in raw["Resources"].values()
                           if r["Type"] == "AWS::IAM::Policy"
                           and "ImagesWorker" in json.dumps(r["Properties"]["Roles"])])
    assert "execute-api:Invoke" in policies and "/workers/lease" in policies
