"""The schema says what the server does (issue 45): four rules the server enforced that
docs/openapi.json did not state, each checked both ways (the schema, and the server's 422)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from leasehold.api.app import openapi_json
from leasehold.core.registry import TaskRegistry
from leasehold.lifecycle.app import Leasehold
from tests.integration.api_client import ApiClient


@pytest.fixture(scope="module")
def schemas() -> dict[str, Any]:
    found: dict[str, Any] = json.loads(openapi_json())["components"]["schemas"]
    return found


@pytest.fixture
def api(app: Leasehold, registry: TaskRegistry) -> ApiClient:
    registry.task("report")(lambda payload, ctx: payload)
    return ApiClient(app)


def _target(schema: dict[str, Any]) -> dict[str, Any]:
    [shape] = [s for s in schema["properties"]["target"]["anyOf"] if s.get("type") == "object"]
    return shape


@pytest.mark.parametrize("model", ["SubmitJob", "NewScheduleIn", "ScheduleIn", "TriggerIn"])
def test_a_target_names_exactly_one_kind(schemas: dict[str, Any], model: str) -> None:
    shape = _target(schemas[model])
    assert (shape["minProperties"], shape["maxProperties"]) == (1, 1)


def test_the_server_refuses_a_target_of_two_kinds_or_none(api: ApiClient) -> None:
    http = {"url": "https://api.partner.example/v1"}
    for target in ({}, {"http": http, "aws": {"service": "sqs", "action": "SendMessage"}}):
        assert api.post("/jobs", {"target": target}, tenant="acme").status == 422
        assert api.post("/schedules", {"cron": "@daily", "target": target},
                        tenant="acme").status == 422


@pytest.mark.parametrize("model", ["NewScheduleIn", "ScheduleIn"])
def test_cron_is_not_nullable(schemas: dict[str, Any], model: str) -> None:
    cron = schemas[model]["properties"]["cron"]
    assert cron["type"] == "string" and "anyOf" not in cron


def test_the_server_refuses_a_null_cron(api: ApiClient) -> None:
    assert api.post("/schedules", {"cron": None, "task": "report"}, tenant="acme").status == 422
    sid = api.post("/schedules", {"cron": "@daily", "task": "report"},
                   tenant="acme").body["schedule_id"]
    assert api.call("PATCH", f"/schedules/{sid}", {"cron": None}, tenant="acme").status == 422
    assert api.get(f"/schedules/{sid}", tenant="acme").body["cron"] == "@daily"


def test_a_trigger_pattern_is_not_empty(schemas: dict[str, Any], api: ApiClient) -> None:
    assert schemas["TriggerIn"]["properties"]["pattern"]["minProperties"] == 1
    assert api.post("/triggers", {"pattern": {}, "task": "report"}, tenant="acme").status == 422


@pytest.mark.parametrize("model", ["UniqueIn", "DebounceIn", "ConcurrencyIn", "ThrottleIn"])
def test_keys_are_at_most_200_characters(schemas: dict[str, Any], model: str) -> None:
    assert schemas[model]["properties"]["key"]["maxLength"] == 200


@pytest.mark.parametrize("option", [{"unique": {"key": "k" * 201}},
                                    {"debounce": {"key": "k" * 201, "seconds": 5}}])
def test_the_server_refuses_a_201_character_key(api: ApiClient, option: dict[str, Any]) -> None:
    assert api.post("/jobs", {"task": "report", **option}, tenant="acme").status == 422
    assert api.post("/schedules", {"cron": "@daily", "task": "report", **option},
                    tenant="acme").status == 422
