"""Synth-time proof that the bundle runs the tasks: import every task module from it.

The modules are imported in a fresh interpreter (``python -I -S``: no site-packages, no
``PYTHONPATH``, no working directory) whose only path is the bundle. It writes no bytecode
(``-B``): ``.pyc`` files carry the time they were written, and the bundle's hash is taken from
its content, so they would make every synth a new upload. A module missing from the
bundle, a dependency missing from the requirements or a module that raises on import therefore
fails the synth here, naming the module, instead of failing every function on AWS.

The packages the Lambda runtime provides (``code.RUNTIME_PROVIDED``: boto3 and its
dependencies) are left out of the bundle; the check puts them on its path after the bundle,
as the runtime does, and nothing else: a module that imports boto3 passes, one that imports
a package neither the bundle nor the runtime has fails.

The bundle holds wheels for Lambda (arm64, Python 3.12). Where this machine is something else,
compiled packages in it cannot load here; if the first import fails and the bundle holds any,
the same versions are installed for this machine into a folder put before the bundle (only
those: every pure-Python module still comes from the bundle) and the import is tried again.
"""

from __future__ import annotations

import json
import platform
import site
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

#: Runs in the checking interpreter: argv = [paths (JSON), modules (JSON)].
_PROBE = r"""
import importlib, json, sys
sys.path[:0] = json.loads(sys.argv[1])
report = {"errors": {}, "tasks": {}, "empty": []}
try:
    from leasehold.core.registry import default_registry
except BaseException as exc:
    report["errors"]["leasehold"] = f"{type(exc).__name__}: {exc}"
else:
    for module in json.loads(sys.argv[2]):
        known = set(default_registry.names())
        try:
            importlib.import_module(module)
        except BaseException as exc:
            report["errors"][module] = f"{type(exc).__name__}: {exc}"
            continue
        new = sorted(set(default_registry.names()) - known)
        for name in new:
            report["tasks"][name] = {"module": module, "pool": default_registry.get(name).pool}
        # Registered nothing new: fine only if an earlier module already imported its tasks.
        defined = [n for n in default_registry.names()
                   if (default_registry.get(n).fn.__module__ + ".").startswith(module + ".")]
        if not new and not defined:
            report["empty"].append(module)
print(json.dumps(report))
"""


class TaskCheckError(ValueError):
    """The bundle cannot run the tasks this deployment names."""


def check_tasks(bundle: Path, *, task_modules: Sequence[str], pools: Sequence[str],
                required_tasks: Sequence[str] = (), isolated: bool = True,
                python: str = sys.executable,
                runtime: Path | None = None) -> dict[str, dict[str, str]]:
    """Import ``task_modules`` from ``bundle``; raise :class:`TaskCheckError` naming every
    module that fails, every module that registers no task (a typo would otherwise deploy
    none) and every required task that no module registers. Returns the
    registered tasks (name -> module and pool).

    ``isolated=False`` (a bundle without its dependencies, as tests build it) also puts this
    interpreter's site-packages after the bundle. ``runtime``: a folder holding what the
    Lambda runtime provides, put after the bundle.
    """
    if not task_modules:
        raise TaskCheckError("name at least one task module (tasks=[\"myapp.tasks\"])")
    provided = [] if runtime is None else [str(runtime)]
    extra = [] if isolated else [*site.getsitepackages()]
    report = _probe(python, [str(bundle), *provided, *extra], task_modules)
    if report["errors"] and isolated and not _runs_lambda_wheels():
        with tempfile.TemporaryDirectory(prefix="leasehold-check-") as native:
            if _install_native(python, bundle, Path(native)):
                report = _probe(python, [native, str(bundle), *provided], task_modules)
    problems = [f"task module {module!r} cannot be imported from the bundle: {error}"
                for module, error in report["errors"].items()]
    problems += [f"task module {module!r} registers no task (no @task in it: is the module "
                 "name right?)" for module in report.get("empty", [])]
    tasks: dict[str, dict[str, str]] = report["tasks"]
    for name in required_tasks:
        if name not in tasks:
            registered = ", ".join(sorted(tasks)) or "none"
            problems.append(f"task {name!r} is not registered by the task modules "
                            f"{', '.join(task_modules)} (they register: {registered})")
    for name, where in sorted(tasks.items()):
        if where["pool"] not in pools:
            problems.append(f"task {name!r} (module {where['module']!r}) runs in pool "
                            f"{where['pool']!r}, which this deployment does not have "
                            f"(pools: {', '.join(pools)})")
    if problems:
        raise TaskCheckError("the Lambda bundle cannot run the tasks:\n  "
                             + "\n  ".join(problems))
    return tasks


def _probe(python: str, paths: list[str], modules: Sequence[str]) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="leasehold-check-") as cwd:
        result = subprocess.run(
            [python, "-I", "-S", "-B", "-c", _PROBE, json.dumps(paths),
             json.dumps(list(modules))],
            capture_output=True, text=True, check=False, cwd=cwd, timeout=300)
    try:
        report: dict[str, Any] = json.loads(result.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        # The interpreter died (a module called os._exit, a crash): name what it said.
        raise TaskCheckError(
            f"importing the task modules {', '.join(modules)} from the bundle stopped the "
            f"interpreter (exit {result.returncode}): {result.stderr.strip()[-2000:]}"
        ) from None
    return report


def _runs_lambda_wheels() -> bool:
    """Whether this interpreter can load the bundle's compiled packages as they are."""
    return (sys.platform == "linux" and platform.machine() in ("aarch64", "arm64")
            and sys.version_info[:2] == (3, 12))


def _install_native(python: str, bundle: Path, target: Path) -> bool:
    """Install this machine's build of each compiled distribution in the bundle (same
    version) into ``target``; ``False`` if there is none."""
    pins = []
    for info in bundle.glob("*.dist-info"):
        record = info / "RECORD"
        if record.is_file() and ".so," in record.read_text():
            name, _, version = info.name.removesuffix(".dist-info").partition("-")
            pins.append(f"{name}=={version}")
    if not pins:
        return False
    result = subprocess.run(
        [python, "-m", "pip", "install", "--quiet", "--no-deps", "--no-compile",
         "--disable-pip-version-check", "--target", str(target), *sorted(pins)],
        capture_output=True, text=True, check=False, cwd=target)
    if result.returncode != 0:
        raise TaskCheckError(
            "the bundle's compiled packages are built for Lambda (arm64, Python 3.12) and "
            f"cannot be checked on this machine: installing {', '.join(pins)} for it failed:"
            f"\n{result.stderr.strip()[-2000:]}")
    return True
