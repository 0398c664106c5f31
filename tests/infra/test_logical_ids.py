"""The repository's stack keeps the logical ids it had before the ``Leasehold`` construct:
an existing deployment updates in place instead of replacing every resource."""

from __future__ import annotations

import aws_cdk as cdk
import pytest
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra.stack import CONSTRUCT_ID, unique_id
from tests.infra.conftest import Synthesized

pytestmark = pytest.mark.infra


def _path(element: cdk.CfnElement, stack: cdk.Stack) -> list[str]:
    scopes = element.node.scopes
    return [scope.node.id for scope in scopes[scopes.index(stack) + 1:]]


def test_unique_id_allocates_what_cdk_itself_allocates() -> None:
    stack = cdk.Stack(cdk.App(), "Plain")
    sqs.Queue(stack, "Top")
    sqs.Queue(Construct(Construct(stack, "Outer"), "Default"), "Inner")
    sqs.Queue(Construct(stack, "MyQueue"), "Queue")  # a repeat the readable part drops
    sqs.Queue(Construct(stack, "my-thing.v2"), "Resource")
    cdk.CfnOutput(stack, "Out", value="x")
    elements = [c for c in stack.node.find_all() if isinstance(c, cdk.CfnElement)]
    assert len(elements) >= 5
    for element in elements:
        assert stack.resolve(stack.get_logical_id(element)) == unique_id(
            _path(element, stack)), _path(element, stack)


def test_the_construct_id_is_left_out_of_the_repository_stacks_logical_ids(
        synthesized: Synthesized) -> None:
    stack = synthesized.stack
    checked = 0
    for element in stack.node.find_all():
        if isinstance(element, cdk.CfnResource):
            path = _path(element, stack)
            assert path[0] == CONSTRUCT_ID
            assert stack.resolve(stack.get_logical_id(element)) == unique_id(path[1:])
            checked += 1
    assert checked > 100
    assert "TablesJobs" in " ".join(synthesized.raw["Resources"])
