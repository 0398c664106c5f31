"""The code version (issue 36): every function and container that runs task code carries
the bundle's content hash as ``LEASEHOLD_CODE_VERSION``; a change to the task code makes a
new one."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest

from infra.app import build
from leasehold.settings import Settings

from .conftest import FEATURE_FLAGS, ROOT, Synthesized

pytestmark = pytest.mark.infra


def _versions(raw: dict[str, Any]) -> tuple[dict[str, str | None], set[str]]:
    """Each Lambda function's code version by handler, and the bundle keys they run."""
    functions = [f["Properties"] for f in raw["Resources"].values()
                 if f["Type"] == "AWS::Lambda::Function"
                 and "LEASEHOLD_TASKS" in f["Properties"].get("Environment", {}).get(
                     "Variables", {})]
    versions = {f["Handler"]: f["Environment"]["Variables"].get("LEASEHOLD_CODE_VERSION")
                for f in functions}
    return versions, {str(f["Code"]["S3Key"]) for f in functions}


def test_every_function_and_container_runs_the_bundle_s_hash_as_its_code_version(
        synthesized: Synthesized) -> None:
    versions, keys = _versions(synthesized.raw)
    assert "leasehold.handlers.worker.handler" in versions
    (key,) = keys  # one bundle for every function
    (version,) = set(versions.values())
    assert version is not None and len(version) == 12 and key.startswith(version)
    assert Settings.from_env({"LEASEHOLD_CODE_VERSION": version}).code_version == version
    containers = [c for d in synthesized.resources("AWS::ECS::TaskDefinition").values()
                  for c in d["Properties"]["ContainerDefinitions"]]
    assert containers and all(
        {"Name": "LEASEHOLD_CODE_VERSION", "Value": version} in c["Environment"]
        for c in containers)


def test_a_change_to_the_task_code_is_a_new_code_version(
        synthesized: Synthesized, tmp_path: Any) -> None:
    (before,) = set(_versions(synthesized.raw)[0].values())
    code = tmp_path / "code" / "examples"
    shutil.copytree(ROOT / "examples", code, ignore=shutil.ignore_patterns("__pycache__"))
    with (code / "tasks.py").open("a") as tasks:
        tasks.write("\n# a change to the task code\n")
    app = cdk.App(outdir=str(tmp_path / "out"), context={
        **FEATURE_FLAGS, "leasehold:bundling": "source",
        "tasks": "examples.tasks", "taskPackages": str(code)})
    stack = build(app, nag=False, synthesizer=cdk.DefaultStackSynthesizer(
        generate_bootstrap_version_rule=False))
    raw = json.loads((Path(app.synth().directory) / stack.template_file).read_text())
    (after,) = set(_versions(raw)[0].values())
    assert after is not None and after != before
