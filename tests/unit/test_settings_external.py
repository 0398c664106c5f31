"""External tasks (issue 34): the declaration, as the environment and ``--external`` give it."""

from __future__ import annotations

import pytest

from leasehold.errors import ValidationError
from leasehold.settings import Settings, external_declarations, external_tasks


def test_external_tasks_parse_and_round_trip_through_the_environment() -> None:
    assert external_tasks(["images:resize,crop", "images:thumb", "video:encode"]) == {
        "images": ("resize", "crop", "thumb"), "video": ("encode",)}
    settings = Settings(pools=("default", "images"),
                        external_tasks={"images": ("resize", "crop")})
    env = settings.to_env()
    assert env["LEASEHOLD_EXTERNAL_TASKS"] == "images:resize,crop"
    assert Settings.from_env(env).external_tasks == {"images": ("resize", "crop")}


@pytest.mark.parametrize("given", ["images", "images:", ":resize"])
def test_a_declaration_without_a_pool_or_a_task_is_refused(given: str) -> None:
    with pytest.raises(ValidationError, match="POOL:TASK"):
        external_tasks([given])


def test_an_external_pool_must_be_one_of_the_pools() -> None:
    with pytest.raises(ValidationError, match="not one of the pools"):
        Settings.from_env({"LEASEHOLD_POOLS": "default",
                           "LEASEHOLD_EXTERNAL_TASKS": "images:resize"})


def test_per_task_policies_parse_and_round_trip_through_the_environment() -> None:
    names, policies = external_declarations(
        ['images:{"resize": {"timeout_seconds": 60, "max_attempts": 3}, "crop": {}}',
         "images:thumb"])
    assert names == {"images": ("resize", "crop", "thumb")}
    assert policies == {"resize": {"timeout_seconds": 60, "max_attempts": 3}}
    settings = Settings(pools=("default", "images"), external_tasks=names,
                        external_policies=policies)
    assert Settings.from_env(settings.to_env()).external_policies == policies


@pytest.mark.parametrize(("policies", "says"), [
    ({"other": {"timeout_seconds": 1}}, "not an external task"),
    ({"resize": {"timeout": 1}}, "unknown"),
])
def test_a_policy_names_an_external_task_and_only_what_a_policy_sets(
        policies: dict[str, dict[str, int]], says: str) -> None:
    with pytest.raises(ValidationError, match=says):
        Settings(pools=("default", "images"), external_tasks={"images": ("resize",)},
                 external_policies=policies).validate()


def test_a_policy_s_values_are_checked_where_the_task_is_registered() -> None:
    from leasehold.remote import definition
    assert definition("resize", "images", {"priority": "high"}).priority == "high"
    for bad in ({"timeout_seconds": 0}, {"max_attempts": 0}, {"priority": "urgent"},
                {"retry": {"min_backoff_seconds": -1}}):
        with pytest.raises(ValidationError):
            definition("resize", "images", bad)


def test_an_external_pool_config_with_policies_deploys_them() -> None:
    from leasehold.cdk.config import LeaseholdConfig, PoolConfig
    config = LeaseholdConfig(pools=(PoolConfig(name="default"), PoolConfig(
        name="images", kind="external",
        tasks={"resize": {"timeout_seconds": 60, "max_attempts": 3}, "crop": {}})))
    config.validate()
    settings = config.settings()
    assert settings.external_tasks == {"images": ("resize", "crop")}
    assert settings.external_policies == {"resize": {"timeout_seconds": 60, "max_attempts": 3}}
    assert "LEASEHOLD_EXTERNAL_POLICIES" in settings.to_env()


def test_an_external_pool_from_cdk_context_keeps_each_task_s_policy() -> None:
    """``-c pools='[...]'`` is JSON: a pool's tasks given as a mapping keep their policies
    (a tuple of the mapping would keep only the names)."""
    from leasehold.cdk.config import LeaseholdConfig, PoolConfig
    images = PoolConfig.from_json({"name": "images", "kind": "external",
                                   "tasks": {"resize": {"timeout_seconds": 60}, "crop": {}}})
    settings = LeaseholdConfig(pools=(PoolConfig(name="default"), images)).settings()
    assert settings.external_tasks == {"images": ("resize", "crop")}
    assert settings.external_policies == {"resize": {"timeout_seconds": 60}}
    listed = PoolConfig.from_json({"name": "images", "kind": "external", "tasks": ["resize"]})
    assert listed.tasks == ("resize",)
