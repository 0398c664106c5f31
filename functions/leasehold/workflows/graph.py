"""Pure checks on a workflow's graph: ids, references, size and acyclicity.

Everything here runs before anything is written, and every error names the step at fault
(``ValidationError.field`` is ``steps[<index>]...``, the message quotes the step id).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from leasehold.errors import ValidationError

MAX_STEPS = 500
#: Each edge is stored twice (on the dependency and on the dependent row), and each dependent
#: row holds one result entry per dependency: this keeps every row far below DynamoDB's 400 KB.
MAX_EDGES = 10_000
#: Step ids are keys of the dependents' input maps and parts of job ids: short and plain.
STEP_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


@dataclass(frozen=True)
class Graph:
    """A valid DAG: step ids in submission order and both directions of every edge."""

    order: tuple[str, ...]
    depends_on: Mapping[str, tuple[str, ...]]
    dependents: Mapping[str, tuple[str, ...]]

    @property
    def roots(self) -> tuple[str, ...]:
        return tuple(s for s in self.order if not self.depends_on[s])

    def topological(self) -> tuple[str, ...]:
        """Dependencies before dependents; ties kept in submission order."""
        return _kahn(self.order, self.depends_on, self.dependents)[0]


def check_graph(steps: Sequence[tuple[str, Sequence[str]]]) -> Graph:
    """Validate ``(step_id, depends_on)`` pairs into a :class:`Graph`, or raise naming the step."""
    if not steps:
        raise ValidationError("steps", "a workflow needs at least one step")
    if len(steps) > MAX_STEPS:
        raise ValidationError("steps", f"at most {MAX_STEPS} steps; got {len(steps)}")
    index: dict[str, int] = {}
    for i, (step_id, _) in enumerate(steps):
        if not isinstance(step_id, str) or not STEP_ID.match(step_id):
            raise ValidationError(
                f"steps[{i}].id",
                f"step id {step_id!r} must be 1-64 letters, digits, '_', '.' or '-'")
        if step_id in index:
            raise ValidationError(f"steps[{i}].id", f"step {step_id!r} is defined twice")
        index[step_id] = i
    depends_on: dict[str, tuple[str, ...]] = {}
    dependents: dict[str, list[str]] = {step_id: [] for step_id in index}
    edges = 0
    for i, (step_id, deps) in enumerate(steps):
        field = f"steps[{i}].depends_on"
        if isinstance(deps, str) or not isinstance(deps, Sequence):
            raise ValidationError(field, f"step {step_id!r}: depends_on must be a list of step ids")
        seen: list[str] = []
        for dep in deps:
            if not isinstance(dep, str):
                raise ValidationError(field, f"step {step_id!r}: {dep!r} is not a step id")
            if dep == step_id:
                raise ValidationError(field, f"step {step_id!r} depends on itself")
            if dep not in index:
                raise ValidationError(field, f"step {step_id!r} depends on unknown step {dep!r}")
            if dep in seen:
                raise ValidationError(field, f"step {step_id!r} lists {dep!r} twice")
            seen.append(dep)
            dependents[dep].append(step_id)
        depends_on[step_id] = tuple(seen)
        edges += len(seen)
    if edges > MAX_EDGES:
        raise ValidationError("steps", f"at most {MAX_EDGES} dependencies in all; got {edges}")
    order = tuple(index)
    frozen = {k: tuple(v) for k, v in dependents.items()}
    _, stuck = _kahn(order, depends_on, frozen)
    if stuck:
        cycle = _find_cycle(stuck, depends_on)
        first = min(cycle, key=index.__getitem__)
        path = " -> ".join([*_rotate(cycle, first), first])
        raise ValidationError(f"steps[{index[first]}].depends_on",
                              f"steps form a cycle: {path}")
    return Graph(order, depends_on, frozen)


def _kahn(order: Sequence[str], depends_on: Mapping[str, Sequence[str]],
          dependents: Mapping[str, Sequence[str]]) -> tuple[tuple[str, ...], list[str]]:
    """Topological order, plus the steps left over (those on or behind a cycle)."""
    pending = {s: len(depends_on[s]) for s in order}
    ready = [s for s in order if pending[s] == 0]
    out: list[str] = []
    while ready:
        step = ready.pop(0)
        out.append(step)
        for dependent in dependents[step]:
            pending[dependent] -= 1
            if pending[dependent] == 0:
                ready.append(dependent)
    done = set(out)
    return tuple(out), [s for s in order if s not in done]


def _find_cycle(stuck: Sequence[str], depends_on: Mapping[str, Sequence[str]]) -> list[str]:
    """One cycle among the stuck steps, as a dependency path (a depends on b depends on ...).

    Every stuck step has a stuck dependency (else Kahn would have freed it), so walking
    dependencies from any stuck step must revisit one: the walk from there is a cycle.
    """
    left = set(stuck)
    step = stuck[0]
    path: list[str] = []
    position: dict[str, int] = {}
    while step not in position:
        position[step] = len(path)
        path.append(step)
        step = next(dep for dep in depends_on[step] if dep in left)
    return path[position[step]:]


def _rotate(cycle: list[str], first: str) -> list[str]:
    at = cycle.index(first)
    return cycle[at:] + cycle[:at]
