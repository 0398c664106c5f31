"""One synthesis per test session: every infra test reads the same cloud assembly.

Synthesis uses ``bundling="source"`` (the bundle without its pip-installed dependencies): the
code is never run here, and the real pip bundle would need the network and ~20 s. The task
modules are still imported from it at synth, with this interpreter's packages for the rest.
It uses the CDK feature flags of ``cdk.json`` (the CLI passes them as context), so the template
under test is the one ``cdk synth`` writes.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Template

from infra.app import build
from infra.stack import LeaseholdStack
from leasehold.cdk.config import LeaseholdConfig, PoolConfig

os.environ.setdefault("JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION", "1")
ROOT = Path(__file__).resolve().parents[2]
#: The ``@aws-cdk/...`` feature flags in cdk.json's context.
FEATURE_FLAGS = {key: value for key, value in
                 json.loads((ROOT / "cdk.json").read_text())["context"].items()
                 if key.startswith("@aws-cdk")}

#: A Lambda pool and two ECS pools (a named image and a built one): every construct is in the
#: template.
CONFIG = LeaseholdConfig(
    prefix="lhtest",
    pools=(
        PoolConfig(name="default", timeout_seconds=120,
                   concurrency={"high": 12, "normal": 6, "low": 2}),
        PoolConfig(name="long", kind="ecs", timeout_seconds=3600, max_tasks=4,
                   image="123456789012.dkr.ecr.eu-west-1.amazonaws.com/leasehold:1.4"),
        # No image: one is built from the Lambda bundle (a Docker image asset).
        PoolConfig(name="built", kind="ecs", timeout_seconds=600, max_tasks=2),
    ),
    shards=8,
    task_modules=("examples.tasks",),
    code=(str(ROOT / "examples"),),
    alarm_email="oncall@example.com",
    bundling="source",
    # Not the defaults: every function and worker must carry these (test_config.py).
    tenant_rate=20.0, tenant_burst=40.0, tenant_max_live=250, max_backlog=5_000,
)


@dataclass(frozen=True)
class Synthesized:
    app: cdk.App
    stack: LeaseholdStack
    config: LeaseholdConfig
    outdir: Path
    template_path: Path
    raw: dict[str, Any]
    template: Template

    def resources(self, kind: str) -> dict[str, dict[str, Any]]:
        return {logical: resource for logical, resource in self.raw["Resources"].items()
                if resource["Type"] == kind}


@pytest.fixture(scope="session")
def synthesized(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    outdir = tmp_path_factory.mktemp("cdk.out")
    app = cdk.App(outdir=str(outdir), context=FEATURE_FLAGS)
    # No bootstrap-version rule: moto's CloudFormation has no SSM bootstrap parameter.
    # The rule is the only thing this synthesizer setting changes.
    stack = build(app, config=CONFIG, nag=False, synthesizer=cdk.DefaultStackSynthesizer(
        generate_bootstrap_version_rule=False))
    assembly = app.synth()
    template_path = Path(assembly.directory) / stack.template_file
    raw = json.loads(template_path.read_text())
    return Synthesized(app=app, stack=stack, config=CONFIG, outdir=Path(assembly.directory),
                       template_path=template_path, raw=raw, template=Template.from_json(raw))
