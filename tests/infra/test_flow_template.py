"""Pausing a Lambda pool on AWS disables its SQS event source mappings: the API function
names them and may update those mappings, and nothing else may."""

from __future__ import annotations

import json
from typing import Any

from tests.infra.conftest import Synthesized


def _api_function(synthesized: Synthesized) -> dict[str, Any]:
    return next(f for f in synthesized.resources("AWS::Lambda::Function").values()
                if f["Properties"]["Handler"] == "leasehold.handlers.api.handler")


def _queue_mappings(synthesized: Synthesized) -> set[str]:
    """The pools' SQS mappings (not the relay's on the jobs table's stream)."""
    queues = synthesized.resources("AWS::SQS::Queue")
    return {logical for logical, m in
            synthesized.resources("AWS::Lambda::EventSourceMapping").items()
            if m["Properties"]["EventSourceArn"]["Fn::GetAtt"][0] in queues}


def test_the_api_names_each_lambda_pool_s_event_source_mappings(
        synthesized: Synthesized) -> None:
    mappings = _queue_mappings(synthesized)
    assert len(mappings) == 3  # the one Lambda pool's three priorities
    variable = _api_function(synthesized)["Properties"]["Environment"]["Variables"][
        "LEASEHOLD_EVENT_SOURCE_MAPPINGS"]
    text = json.dumps(variable)
    assert '"default=' in text and "long=" not in text and "built=" not in text
    assert {m for m in synthesized.resources("AWS::Lambda::EventSourceMapping")
            if json.dumps({"Ref": m}) in text} == mappings


def test_only_the_api_may_update_event_source_mappings_and_only_those(
        synthesized: Synthesized) -> None:
    api_role = _api_function(synthesized)["Properties"]["Role"]["Fn::GetAtt"][0]
    mappings = _queue_mappings(synthesized)
    granted: list[tuple[list[dict[str, Any]], Any]] = []
    for policy in synthesized.resources("AWS::IAM::Policy").values():
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            actions = statement["Action"]
            actions = actions if isinstance(actions, list) else [actions]
            if "lambda:UpdateEventSourceMapping" in actions:
                granted.append((policy["Properties"]["Roles"], statement["Resource"]))
    [(roles, resources)] = granted
    assert roles == [{"Ref": api_role}]
    text = json.dumps(resources)
    assert "*" not in text
    assert {m for m in synthesized.resources("AWS::Lambda::EventSourceMapping")
            if f'"{m}"' in text} == mappings  # not the relay's: pausing a pool leaves it be
