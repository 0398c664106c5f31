"""Real validators on the synthesized stack: cdk-nag's rule packs and cfn-lint."""

from __future__ import annotations

import pytest
from cdk_nag import AwsSolutionsChecks, NagPack, ServerlessChecks
from cfnlint.api import lint_file
from cfnlint.config import ManualArgs

from tests.infra.conftest import Synthesized

pytestmark = pytest.mark.infra

#: W3005 flags the DependsOn CDK writes from each Lambda to its role (a redundant but harmless
#: dependency CDK always emits); everything else, warnings included, must be clean.
CFN_LINT_IGNORED = ["W3005"]


def _findings(pack: NagPack, synthesized: Synthesized) -> list[str]:
    report = pack.validate_scope(synthesized.app)
    return [f"{violation.rule_name} at {resource.construct_path}"
            for violation in report.violations
            for resource in violation.violating_resources]


def test_cdk_nag_aws_solutions_has_no_unacknowledged_findings(
        synthesized: Synthesized) -> None:
    assert _findings(AwsSolutionsChecks(), synthesized) == []


def test_cdk_nag_serverless_has_no_unacknowledged_findings(synthesized: Synthesized) -> None:
    assert _findings(ServerlessChecks(), synthesized) == []


def test_every_acknowledged_rule_carries_a_reason(synthesized: Synthesized) -> None:
    acknowledged: list[tuple[str, str]] = []
    for construct in synthesized.app.node.find_all():
        for entry in construct.node.metadata:
            if entry.type == "aws:cdk:acknowledged-rules":
                acknowledged += [(rule, str(reason)) for rule, reason in entry.data.items()]
    assert acknowledged
    for rule, reason in acknowledged:
        assert len(reason) > 30, rule


def test_cfn_lint_passes_on_the_synthesized_template(synthesized: Synthesized) -> None:
    matches = lint_file(synthesized.template_path, config=ManualArgs(
        regions=["us-east-1", "eu-west-1"], ignore_checks=CFN_LINT_IGNORED))
    assert [str(match) for match in matches] == []
