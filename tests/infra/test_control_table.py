"""The control table of cells with a home Region (issue 48): an MRSC global table in the
primary Region's stack, imported and granted in every cell's, refused where MRSC refuses."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Match, Template
from cdk_nag import AwsSolutionsChecks, NagPack, ServerlessChecks
from cfnlint.api import lint_file
from cfnlint.config import ManualArgs

from infra.app import build
from leasehold.cdk.config import LeaseholdConfig

from .conftest import CONFIG, FEATURE_FLAGS
from .test_validators import CFN_LINT_IGNORED

REGIONS = ("us-east-1", "us-east-2", "us-west-2")


def _findings(pack: NagPack, app: cdk.App) -> list[str]:
    report = pack.validate_scope(app)
    return [f"{violation.rule_name} at {resource.construct_path}"
            for violation in report.violations for resource in violation.violating_resources]


def synth(tmp_path: Any, cell_region: str, **overrides: Any) -> dict[str, Any]:
    config = dataclasses.replace(CONFIG, **{"cell_region": cell_region,
                                            "control_regions": REGIONS, **overrides})
    app = cdk.App(outdir=str(tmp_path), context=FEATURE_FLAGS)
    # MRSC needs the stack's Region: CDK refuses it in an environment-agnostic stack.
    stack = build(app, config=config, nag=False, env=cdk.Environment(
        account="123456789012", region=cell_region),
        synthesizer=cdk.DefaultStackSynthesizer(generate_bootstrap_version_rule=False))
    assembly = app.synth()
    path = Path(assembly.directory) / stack.template_file
    # cdk-nag finds nothing the control table brought (the same stack in this Region
    # without cells is the baseline: its ECS task ARNs resolve here, unacknowledged), and
    # cfn-lint stays clean.
    findings = _findings(AwsSolutionsChecks(), app) + _findings(ServerlessChecks(), app)
    assert set(findings) <= _baseline(cell_region)
    # W3010: the Fargate pools' VPC, looked up in an account-bound stack, has CDK's
    # placeholder Availability Zones (``dummy1a``) when no lookup ran: not the control table.
    matches = lint_file(path, config=ManualArgs(regions=[cell_region],
                                                ignore_checks=[*CFN_LINT_IGNORED, "W3010"]))
    assert [str(match) for match in matches] == []
    return dict(json.loads(path.read_text()))


_BASELINES: dict[str, set[str]] = {}


def _baseline(region: str) -> set[str]:
    if region not in _BASELINES:
        app = cdk.App(context=FEATURE_FLAGS)
        build(app, config=CONFIG, nag=False, env=cdk.Environment(
            account="123456789012", region=region),
            synthesizer=cdk.DefaultStackSynthesizer(generate_bootstrap_version_rule=False))
        app.synth()
        _BASELINES[region] = set(_findings(AwsSolutionsChecks(), app)
                                 + _findings(ServerlessChecks(), app))
    return _BASELINES[region]


def test_the_primary_cell_creates_an_mrsc_global_table_across_three_regions(tmp_path) -> None:  # type: ignore[no-untyped-def]
    raw = synth(tmp_path, "us-east-1")
    template = Template.from_json(raw)
    template.has_resource_properties("AWS::DynamoDB::GlobalTable", {
        "TableName": "lhtest-control",
        "MultiRegionConsistency": "STRONG",
        "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}],
    })
    table = next(r for r in raw["Resources"].values()
                 if r["Type"] == "AWS::DynamoDB::GlobalTable")
    assert sorted(r["Region"] for r in table["Properties"]["Replicas"]) == sorted(REGIONS)
    # MRSC allows no TTL: the control table has none.
    tables = template.find_resources("AWS::DynamoDB::GlobalTable")
    assert all("TimeToLiveSpecification" not in t["Properties"] for t in tables.values())
    # Every function carries the cell's settings.
    template.has_resource_properties("AWS::Lambda::Function", {"Environment": {"Variables":
        Match.object_like({"LEASEHOLD_CELL_REGION": "us-east-1",
                           "LEASEHOLD_CONTROL_TABLE": "lhtest-control",
                           "LEASEHOLD_CONTROL_REGION": "us-east-1"})}})


def test_two_regions_and_a_witness(tmp_path) -> None:  # type: ignore[no-untyped-def]
    raw = synth(tmp_path, "us-east-1", control_regions=REGIONS[:2],
                control_witness="us-west-2")
    table = next(r for r in raw["Resources"].values()
                 if r["Type"] == "AWS::DynamoDB::GlobalTable")
    assert table["Properties"]["GlobalTableWitnesses"] == [{"Region": "us-west-2"}]
    assert len(table["Properties"]["Replicas"]) == 2


def test_another_cell_imports_the_table_and_its_workers_may_use_it(tmp_path) -> None:  # type: ignore[no-untyped-def]
    raw = synth(tmp_path, "us-west-2")
    assert not [r for r in raw["Resources"].values() if r["Type"] == "AWS::DynamoDB::GlobalTable"]
    text = json.dumps([r for r in raw["Resources"].values() if r["Type"] == "AWS::IAM::Policy"])
    assert "table/lhtest-control" in text
    assert ":us-west-2:" in text or "us-west-2" in text


@pytest.mark.parametrize("regions, witness", [
    (REGIONS[:2], None),                             # two Regions and no witness
    (("us-east-1", "eu-west-1", "us-west-2"), None),  # across Region sets
    (REGIONS, "us-west-1"),                          # three and a witness
])
def test_what_mrsc_refuses_is_refused_at_synth(regions, witness) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValueError, match=r"controlRegions|MRSC|Region set"):
        LeaseholdConfig(cell_region="us-east-1", control_regions=regions,
                        control_witness=witness).validate()


def test_a_cell_alarms_on_its_region_lease_age_and_on_misdirected_submissions(tmp_path) -> None:  # type: ignore[no-untyped-def]
    template = Template.from_json(synth(tmp_path, "us-east-2"))
    template.has_resource_properties("AWS::CloudWatch::Alarm", {
        "MetricName": "RegionLeaseAgeMs", "Namespace": "Leasehold", "Statistic": "Maximum",
        "Threshold": 20000,  # two thirds of the 30 s lease: two renewals failed
        "ComparisonOperator": "GreaterThanOrEqualToThreshold",
        "TreatMissingData": "notBreaching",
        "AlarmActions": Match.any_value(),
        "AlarmDescription": Match.string_like_regexp("us-east-2.*Region lease"),
    })
    template.has_resource_properties("AWS::CloudWatch::Alarm", {
        "MetricName": "MisdirectedSubmissions", "Statistic": "Sum", "Period": 300,
        "AlarmActions": Match.any_value(),
    })
    # No replica of its jobs table named: no replication-lag alarm.
    assert not template.find_resources("AWS::CloudWatch::Alarm", {
        "Properties": {"MetricName": "ReplicationLatency"}})


def test_a_cell_alarms_on_each_replica_of_its_jobs_table_lagging(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The take-over's replicas (``jobsReplicaRegions``): one alarm per receiving Region on
    DynamoDB's ``ReplicationLatency``, minutes in a row past the threshold."""
    template = Template.from_json(synth(tmp_path, "us-east-1",
                                        jobs_replica_regions=("us-east-2", "us-west-2"),
                                        replication_lag_alarm_seconds=30))
    jobs_table = CONFIG.settings().jobs_table
    lags = template.find_resources("AWS::CloudWatch::Alarm", {
        "Properties": {"MetricName": "ReplicationLatency"}})
    assert sorted(dimension["Value"] for alarm in lags.values()
                  for dimension in alarm["Properties"]["Dimensions"]
                  if dimension["Name"] == "ReceivingRegion") == ["us-east-2", "us-west-2"]
    for replica in ("us-east-2", "us-west-2"):
        template.has_resource_properties("AWS::CloudWatch::Alarm", {
            "Namespace": "AWS/DynamoDB", "MetricName": "ReplicationLatency",
            "Statistic": "Maximum", "Period": 60, "Threshold": 30000,
            "EvaluationPeriods": 3, "DatapointsToAlarm": 3,
            "Dimensions": Match.array_with([{"Name": "ReceivingRegion", "Value": replica},
                                            {"Name": "TableName", "Value": jobs_table}]),
            "ComparisonOperator": "GreaterThanOrEqualToThreshold",
            "AlarmActions": Match.any_value(),
            "AlarmDescription": Match.string_like_regexp(f"us-east-1.*{replica}.*take-over"),
        })


@pytest.mark.parametrize("cell, replicas", [(None, ("us-east-2",)),
                                            ("us-east-1", ("us-east-1",))])
def test_a_jobs_replica_is_in_another_region_than_the_cells(cell, replicas) -> None:  # type: ignore[no-untyped-def]
    config = dataclasses.replace(CONFIG, cell_region=cell, control_regions=REGIONS,
                                 jobs_replica_regions=replicas)
    with pytest.raises(ValueError, match="jobsReplicaRegions"):
        config.validate()


def test_a_single_region_deployment_has_no_cell_alarms(tmp_path) -> None:  # type: ignore[no-untyped-def]
    app = cdk.App(outdir=str(tmp_path), context=FEATURE_FLAGS)
    stack = build(app, config=CONFIG, nag=False, synthesizer=cdk.DefaultStackSynthesizer(
        generate_bootstrap_version_rule=False))
    alarms = Template.from_stack(stack).find_resources("AWS::CloudWatch::Alarm")
    names = {a["Properties"].get("MetricName") for a in alarms.values()}
    assert alarms and not names & {"RegionLeaseAgeMs", "MisdirectedSubmissions"}
