"""Configuration from CDK context: what ``cdk deploy -c key=value`` and cdk.json can say."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path
from typing import Any

import aws_cdk
import pytest

from infra.app import FLAGS_LEFT_OFF
from leasehold.cdk.config import LeaseholdConfig, PoolConfig

from .conftest import Synthesized

pytestmark = pytest.mark.infra

ROOT = Path(__file__).resolve().parents[2]


def _context(values: dict[str, Any]) -> LeaseholdConfig:
    return LeaseholdConfig.from_context(values.get)


def test_an_empty_context_gives_the_defaults_with_real_bundling() -> None:
    config = _context({})
    assert config == LeaseholdConfig()
    assert config.bundling == "pip"


def test_cdk_json_deploys_with_real_bundling_and_valid_settings() -> None:
    context = json.loads((ROOT / "cdk.json").read_text())["context"]
    assert "leasehold:bundling" not in context
    config = _context(context)
    assert config.bundling == "pip"
    assert [pool.name for pool in config.pools] == ["default"]


def test_command_line_strings_are_parsed() -> None:
    config = _context({
        "shards": "16", "leaseSeconds": "90", "alarmEmail": "ops@example.com",
        "retainData": "false", "waf": "no", "tasks": "app.tasks,app.more",
        "pools": json.dumps([{"name": "default"},
                             {"name": "gpu", "kind": "ecs", "image": "repo/img:1", "cpu": 2048,
                              "memory": 8192, "maxTasks": 3}]),
        "tenantRate": "5", "tenantBurst": "10", "tenantMaxLive": "0", "maxBacklog": "900",
    })
    assert config.shards == 16
    assert (config.tenant_rate, config.tenant_burst, config.tenant_max_live,
            config.max_backlog) == (5.0, 10.0, 0, 900)
    assert config.settings().tenant_max_live == 0  # no cap
    assert config.lease_seconds == 90.0
    assert config.alarm_email == "ops@example.com"
    assert config.retain_data is False
    assert config.waf is False
    assert config.task_modules == ("app.tasks", "app.more")
    assert config.pools[1] == PoolConfig(name="gpu", kind="ecs", image="repo/img:1", cpu=2048,
                                         memory_mb=8192, max_tasks=3)


def test_settings_name_every_resource_after_the_prefix() -> None:
    settings = LeaseholdConfig(prefix="acme").settings()
    assert settings.jobs_table == "acme-jobs-v2"
    assert settings.queue_prefix == "acme"


@pytest.mark.parametrize(("pools", "message"), [
    ([{"name": "a"}, {"name": "a"}], "unique"),
    ([{"name": "a", "timeout": 901}], "900"),
    ([{"name": "a", "timeout": 10}], "11..900"),
    ([{"name": "a", "concurrency": {"high": 5, "normal": 1, "low": 2}}], ">= 2"),
    ([{"name": "a", "concurrency": {"high": 5}}], "missing"),
    ([{"name": "a", "colour": "blue"}], "unknown"),
])
def test_invalid_pools_are_rejected_before_synthesis(pools: list[dict[str, Any]],
                                                     message: str) -> None:
    with pytest.raises(ValueError, match=message):
        _context({"pools": pools})


def _recommended_flags() -> dict[str, Any]:
    """The recommended feature flags of the installed aws-cdk-lib (what ``cdk init`` writes)."""
    bundle = next((Path(aws_cdk.__file__).parent / "_jsii").glob("aws-cdk-lib@*.jsii.tgz"))
    with tarfile.open(bundle) as archive:
        member = archive.extractfile("package/recommended-feature-flags.json")
        assert member is not None
        return dict(json.load(member))


def test_cdk_json_sets_every_recommended_feature_flag_but_the_ones_left_off_with_a_reason(
        ) -> None:
    context = json.loads((ROOT / "cdk.json").read_text())["context"]
    recommended = _recommended_flags()
    assert len(recommended) > 50
    differing = {flag for flag, value in recommended.items() if context.get(flag) != value}
    assert differing == set(FLAGS_LEFT_OFF)
    for flag, reason in FLAGS_LEFT_OFF.items():
        assert context[flag] is False and len(reason) > 30, flag


def test_event_archive_days_come_from_context_and_must_not_be_negative() -> None:
    assert _context({}).event_archive_days == 30
    assert _context({"eventArchiveDays": "0"}).event_archive_days == 0
    with pytest.raises(ValueError, match="eventArchiveDays"):
        _context({"eventArchiveDays": "-1"})


def test_the_functions_publish_to_the_bus_named_after_the_prefix() -> None:
    assert LeaseholdConfig(prefix="acme").settings().event_bus == "acme-events"


def test_which_job_states_are_published_comes_from_context_and_reaches_the_functions() -> None:
    assert _context({}).settings().to_env()["LEASEHOLD_PUBLISH"] == "terminal"
    assert _context({"publish": "all"}).settings().to_env()["LEASEHOLD_PUBLISH"] == "all"
    with pytest.raises(ValueError, match="events must be one of terminal, all, off"):
        _context({"publish": "some"})


def test_events_off_reaches_the_functions_as_no_publishing() -> None:
    assert LeaseholdConfig(events="off").settings().to_env()["LEASEHOLD_PUBLISH"] == "off"
    assert _context({"events": "off"}).settings().to_env()["LEASEHOLD_PUBLISH"] == "off"
    assert LeaseholdConfig().events == "terminal"  # the default, $1.00 per million jobs


def test_every_function_and_worker_gets_the_same_tenant_limits(
        synthesized: Synthesized) -> None:
    """Issue 44: the cap was set on the API function alone, and each function read it from
    its own environment; a worker without it spawned children under no cap. The limits are
    settings of the deployment now, written alike on every function and worker container,
    and they read back as the limits the configuration gave."""
    from leasehold.settings import Settings
    from leasehold.tenancy.limits import Limits

    expected = Limits(rate=20.0, burst=40.0, max_live=250, max_backlog=5_000)
    environments: dict[str, dict[str, str]] = {}
    for logical, function in synthesized.resources("AWS::Lambda::Function").items():
        variables = function["Properties"].get("Environment", {}).get("Variables", {})
        if "LEASEHOLD_JOBS_TABLE" in variables:  # one of Leasehold's (not a CDK helper)
            environments[function["Properties"]["Handler"] + " " + logical] = variables
    for logical, task in synthesized.resources("AWS::ECS::TaskDefinition").items():
        for container in task["Properties"]["ContainerDefinitions"]:
            variables = {entry["Name"]: entry["Value"]
                         for entry in container.get("Environment", [])}
            if "LEASEHOLD_JOBS_TABLE" in variables:
                environments[f"ecs {logical}"] = variables
    handlers = " ".join(environments)
    for role in ("api", "worker", "sweeper", "ticker", "relay"):
        assert f"handlers.{role}." in handlers, (role, sorted(environments))
    assert any(name.startswith("ecs ") for name in environments)
    for name, variables in environments.items():
        plain = {key: value for key, value in variables.items() if isinstance(value, str)}
        assert Limits.from_settings(Settings.from_env(plain)) == expected, name
