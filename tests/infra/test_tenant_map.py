"""The operator's tenant mapping: from stack context to the API function, checked at synth."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest

from infra.app import build
from leasehold.api.context import ApiConfig
from leasehold.cdk.config import LeaseholdConfig

from .conftest import FEATURE_FLAGS, ROOT

pytestmark = pytest.mark.infra

MAPPING = {"arn:aws:iam::111122223333:user/Bob": "111122223333:Bob",
           "arn:aws:iam::111122223333:role/team/Deploy": "payments",
           "111122223333:user/alice@corp": "payments"}


def test_the_mapping_reaches_the_api_function_alone_and_the_api_reads_it_back(
        tmp_path: Any) -> None:
    app = cdk.App(outdir=str(tmp_path), context={
        **FEATURE_FLAGS, "leasehold:bundling": "source", "tenants": json.dumps(MAPPING),
        "tasks": "examples.tasks", "taskPackages": str(ROOT / "examples")})
    stack = build(app, nag=False, synthesizer=cdk.DefaultStackSynthesizer(
        generate_bootstrap_version_rule=False))
    assembly = app.synth()
    raw = json.loads((Path(assembly.directory) / stack.template_file).read_text())
    maps = {function["Properties"]["Handler"]: function["Properties"]["Environment"]
            ["Variables"].get("LEASEHOLD_TENANT_MAP")
            for function in raw["Resources"].values()
            if function["Type"] == "AWS::Lambda::Function"
            and "Environment" in function["Properties"]}
    carried = {handler: value for handler, value in maps.items() if value}
    assert list(carried) == ["leasehold.handlers.api.handler"]
    read = ApiConfig.from_env({"LEASEHOLD_TENANT_MAP": carried["leasehold.handlers.api.handler"]})
    assert read.tenants == {"111122223333:user/Bob": "111122223333:Bob",
                            "111122223333:role/Deploy": "payments",
                            "111122223333:user/alice@corp": "payments"}


def test_no_mapping_adds_nothing_to_any_environment() -> None:
    assert LeaseholdConfig().tenant_map_json() == ""


@pytest.mark.parametrize(("tenants", "says"), [
    ({"arn:aws:iam::111122223333:group/Admins": "t"}, "not an IAM user, role"),
    ({"111122223333:user/bob": "has space"}, "not a valid tenant"),
    ({f"111122223333:user/u{i:03}": f"tenant-number-{i:03}" for i in range(60)}, "4 KB"),
])
def test_a_bad_mapping_stops_the_synth(tenants: dict[str, str], says: str) -> None:
    with pytest.raises(ValueError, match=says):
        LeaseholdConfig.from_context({"tenants": json.dumps(tenants)}.get)
