"""External tasks (issue 34): the declaration, as the environment and ``--external`` give it."""

from __future__ import annotations

import pytest

from leasehold.errors import ValidationError
from leasehold.settings import Settings, external_tasks


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
