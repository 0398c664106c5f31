"""The package's architecture, enforced: layers point one way and no import circles.

testing, cdk (the CDK constructs, never bundled) -> handlers/local/api/cli/client (and the
composition root) -> time/workflows/events
-> lifecycle/tenancy -> core/aws -> the ground floor (errors, clock, settings).
``client`` (application code's HTTP client) stands with the other edges, and only core's
registry knows of it through a hook it installs (``task.submit``); ``testing`` (helpers for
applications' tests) is above everything: nothing in the package may import it.
A module may import its own layer and the layers below it, never one above; ``core`` is
pure (no AWS SDK, no other layer but the ground floor). Every import counts, including the
ones inside functions and under ``TYPE_CHECKING``: a lazy import hides a circle, it does not
break it.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "functions" / "leasehold"

#: Layer of each top-level part of the package (higher may import lower, never the reverse).
LAYERS: dict[str, int] = {
    "errors": 0, "clock": 0, "settings": 0,
    "core": 1, "aws": 1,
    "lifecycle": 2, "tenancy": 2,
    "time": 3, "workflows": 3, "events": 3, "metrics": 3, "flow": 3, "bulk": 3, "durable": 3,
    "streams": 3, "targets": 3, "tracing": 3, "polling": 3, "cells": 3,
    "compose": 4, "api": 4, "cli": 4, "handlers": 4, "local": 4, "console": 4, "client": 4,
    "remote": 4, "conformance": 4,
    "testing": 5, "cdk": 5,
}
#: The public facade (``from leasehold import task, RetryPolicy, ...``): it re-exports core.
ROOT_LAYER = 1


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@cache
def _modules() -> dict[str, Path]:
    return {_module_name(path): path for path in PACKAGE.rglob("*.py")}


def _imports(module: str) -> Iterator[tuple[int, str]]:
    """(line, imported leasehold module) for every import in ``module``, wherever it stands."""
    modules = _modules()
    path = modules[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "leasehold":
                    yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            if base.split(".")[0] != "leasehold":
                continue
            for alias in node.names:
                # ``from leasehold.lifecycle import store`` imports a module, not a name.
                child = f"{base}.{alias.name}"
                yield node.lineno, child if child in modules else base


def _layer(module: str) -> int:
    parts = module.split(".")
    if len(parts) == 1:
        return ROOT_LAYER
    return LAYERS[parts[1]]


def test_every_part_of_the_package_has_a_layer() -> None:
    parts = {name.split(".")[1] for name in _modules() if "." in name}
    assert parts <= set(LAYERS), f"give these a layer in LAYERS: {sorted(parts - set(LAYERS))}"


def test_imports_never_point_up_a_layer() -> None:
    upward = [
        f"{module}:{line} imports {target} (layer {_layer(module)} -> {_layer(target)})"
        for module in sorted(_modules()) if "." in module
        for line, target in _imports(module)
        if _layer(target) > _layer(module)
    ]
    assert upward == []


def test_core_is_pure() -> None:
    impure = []
    for module, path in _modules().items():
        if not module.startswith("leasehold.core"):
            continue
        for line, target in _imports(module):
            if _layer(target) >= 1 and not target.startswith("leasehold.core"):
                impure.append(f"{module}:{line} imports {target}")
        source = path.read_text()
        impure += [f"{module} uses the AWS SDK" for sdk in ("boto3", "botocore")
                   if f"import {sdk}" in source or f"from {sdk}" in source]
    assert impure == []


def test_nothing_outside_testing_imports_it() -> None:
    """``leasehold.testing`` (moto, an in-process scheduler) is for applications' tests: no
    module of the package imports it, not even ``cdk``, which shares its layer."""
    found = [f"{module}:{line} imports {target}"
             for module in sorted(_modules()) if not module.startswith("leasehold.testing")
             for line, target in _imports(module) if target.startswith("leasehold.testing")]
    assert found == []


#: The modules that run the local runtime, which alone may import ``leasehold.local``: the
#: ``leasehold dev`` and ``leasehold console`` commands and the testing helpers. Nothing a
#: deployment runs (Lambda handlers, the API, ECS workers' ``leasehold worker``, the remote
#: lease) lives in ``local/`` or imports it (issue 47: the poller ECS runs and the deployed
#: ``POST /workers/lease`` imported lived there).
LOCAL_RUNTIME_USERS = ("leasehold.local", "leasehold.cli.dev", "leasehold.cli.console",
                       "leasehold.testing")


def test_nothing_a_deployment_runs_imports_the_local_runtime() -> None:
    found = [f"{module}:{line} imports {target}"
             for module in sorted(_modules())
             if not any(module == user or module.startswith(user + ".")
                        for user in LOCAL_RUNTIME_USERS)
             for line, target in _imports(module)
             if target == "leasehold.local" or target.startswith("leasehold.local.")]
    assert found == []


#: What the client may import: application code installs and imports it, so it brings only
#: the errors, the pure core (``leasehold.core.registry``: ``task.submit`` goes through the
#: hook the client installs there) and itself; no AWS adapter, no runtime, no API.
CLIENT_MAY_IMPORT = ("leasehold.errors", "leasehold.core", "leasehold.client")


def test_the_client_imports_only_errors_core_and_itself() -> None:
    found = [f"{module}:{line} imports {target}"
             for module in sorted(_modules()) if module.startswith("leasehold.client")
             for line, target in _imports(module)
             if not any(target == allowed or target.startswith(allowed + ".")
                        for allowed in CLIENT_MAY_IMPORT)]
    assert found == []


#: Third-party packages only ``leasehold.cdk`` may import: the Lambda bundle leaves that
#: sub-package out, and has none of these.
CDK_ONLY = ("aws_cdk", "constructs", "jsii", "cdk_nag")


def test_only_the_cdk_package_imports_the_cdk() -> None:
    found = []
    for module, path in _modules().items():
        if module.startswith("leasehold.cdk"):
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = ([alias.name for alias in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            found += [f"{module}:{node.lineno} imports {name}" for name in names
                      if name.split(".")[0] in CDK_ONLY]
    assert found == []


def _circles() -> list[list[str]]:
    graph = {module: {target for _, target in _imports(module) if target != "leasehold"}
             for module in _modules()}
    circles: list[list[str]] = []
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(module: str) -> None:
        state[module] = 1
        path.append(module)
        for target in sorted(graph.get(module, ())):
            if state.get(target) == 1:
                circles.append([*path[path.index(target):], target])
            elif target not in state:
                visit(target)
        path.pop()
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module)
    return circles


def test_there_is_no_import_circle() -> None:
    assert [" -> ".join(circle) for circle in _circles()] == []


@pytest.mark.parametrize("source, expected", [
    ("from leasehold.lifecycle import store\n", ["leasehold.lifecycle.store"]),
    ("from leasehold.lifecycle.store import Change\n", ["leasehold.lifecycle.store"]),
    ("def f():\n    from leasehold.api import app\n", ["leasehold.api.app"]),
    ("import leasehold.time.cron\n", ["leasehold.time.cron"]),
    ("import boto3\n", []),
])
def test_the_checker_sees_every_kind_of_import(source: str, expected: list[str],
                                               tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                               ) -> None:
    probe = "leasehold.core.probe_module"
    monkeypatch.setitem(_modules(), probe, tmp_path / "probe_module.py")
    (tmp_path / "probe_module.py").write_text(source)
    assert [target for _, target in _imports(probe)] == expected
