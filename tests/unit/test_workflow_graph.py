"""The pure DAG checks: every invalid graph is refused with an error naming the step."""

from __future__ import annotations

import pytest

from leasehold.errors import ValidationError
from leasehold.workflows.graph import MAX_EDGES, MAX_STEPS, check_graph

Steps = list[tuple[str, list[str]]]

INVALID: list[tuple[str, Steps, str, str]] = [
    ("empty", [], "steps", "at least one step"),
    ("bad id", [("a b", [])], "steps[0].id", "'a b' must be"),
    ("duplicate id", [("a", []), ("a", [])], "steps[1].id", "step 'a' is defined twice"),
    ("unknown ref", [("a", []), ("b", ["zz"])], "steps[1].depends_on",
     "step 'b' depends on unknown step 'zz'"),
    ("self ref", [("a", ["a"])], "steps[0].depends_on", "step 'a' depends on itself"),
    ("listed twice", [("a", []), ("b", ["a", "a"])], "steps[1].depends_on",
     "step 'b' lists 'a' twice"),
    ("not a list", [("a", "b")], "steps[0].depends_on", "must be a list"),  # type: ignore[list-item]
    ("two-cycle", [("a", ["b"]), ("b", ["a"])], "steps[0].depends_on",
     "cycle: a -> b -> a"),
    ("cycle behind a root", [("r", []), ("x", ["r", "z"]), ("y", ["x"]), ("z", ["y"])],
     "steps[1].depends_on", "cycle: x -> z -> y -> x"),
    ("too many steps", [(f"s{i}", []) for i in range(MAX_STEPS + 1)], "steps",
     f"at most {MAX_STEPS} steps"),
]


@pytest.mark.parametrize(("steps", "field", "message"),
                         [case[1:] for case in INVALID], ids=[case[0] for case in INVALID])
def test_an_invalid_graph_is_refused_naming_the_step(steps: Steps, field: str,
                                                    message: str) -> None:
    with pytest.raises(ValidationError, match=message) as caught:
        check_graph(steps)
    assert caught.value.field == field


def test_too_many_dependencies_in_all_are_refused() -> None:
    layer = [f"a{i}" for i in range(101)]
    steps: Steps = [(s, []) for s in layer]
    steps += [(f"b{i}", layer) for i in range(MAX_EDGES // len(layer) + 1)]
    with pytest.raises(ValidationError, match="dependencies in all"):
        check_graph(steps)


VALID: list[tuple[str, Steps, tuple[str, ...], tuple[str, ...]]] = [
    ("single", [("a", [])], ("a",), ("a",)),
    ("chain", [("c", ["b"]), ("b", ["a"]), ("a", [])], ("a",), ("a", "b", "c")),
    ("diamond", [("a", []), ("b", ["a"]), ("c", ["a"]), ("d", ["b", "c"])], ("a",),
     ("a", "b", "c", "d")),
    ("two roots fan in", [("x", []), ("y", []), ("z", ["x", "y"])], ("x", "y"),
     ("x", "y", "z")),
]


@pytest.mark.parametrize(("steps", "roots", "order"), [case[1:] for case in VALID],
                         ids=[case[0] for case in VALID])
def test_a_valid_graph_gives_roots_and_a_topological_order(
        steps: Steps, roots: tuple[str, ...], order: tuple[str, ...]) -> None:
    graph = check_graph(steps)
    assert graph.roots == roots
    assert graph.topological() == order
    for step, deps in steps:
        for dep in deps:
            assert step in graph.dependents[dep]


def test_the_largest_allowed_fan_out_and_fan_in_is_valid() -> None:
    width = MAX_STEPS - 2
    steps: Steps = [("split", [])] + [(f"p{i}", ["split"]) for i in range(width)]
    steps.append(("join", [f"p{i}" for i in range(width)]))
    graph = check_graph(steps)
    assert len(graph.dependents["split"]) == width
    assert graph.topological()[-1] == "join"
