"""Cold start: import time of each Lambda handler module, and the size of the code asset."""

from __future__ import annotations

import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import tomllib
import zipfile
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

from bench.local import ROOT, clean_env

HANDLERS = ("worker", "sweeper", "ticker", "api", "trigger")
#: Packages the Lambda Python runtime already provides (boto3 and its dependencies).
RUNTIME_PROVIDED = ("boto3", "botocore", "s3transfer", "jmespath", "dateutil", "urllib3", "six")


def _interpreter(code: str) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one fresh interpreter running ``code``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True, env=clean_env(), cwd=ROOT,
                   stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def _median(code: str, runs: int) -> tuple[float, float]:
    samples = [_interpreter(code) for _ in range(runs)]
    return (statistics.median(s[0] for s in samples), statistics.median(s[1] for s in samples))


def import_times(runs: int, handlers: Sequence[str] = HANDLERS) -> dict[str, Any]:
    """Median over ``runs`` fresh interpreters of ``import <handler>``, minus a bare start.

    Wall time is what a cold start waits; CPU time is shown beside it because on a loaded
    machine the wall time also counts waiting for a core.
    """
    for name in handlers:  # compile the .pyc files once, as a deployed bundle ships them
        _interpreter(f"import leasehold.handlers.{name}")
    bare_wall, bare_cpu = _median("pass", runs)
    result: dict[str, Any] = {"runs": runs, "bare_interpreter_ms": round(bare_wall * 1000, 1),
                              "wall_ms": {}, "cpu_ms": {}}
    for name in handlers:
        wall, cpu = _median(f"import leasehold.handlers.{name}", runs)
        result["wall_ms"][name] = round((wall - bare_wall) * 1000, 1)
        result["cpu_ms"][name] = round((cpu - bare_cpu) * 1000, 1)
    if "api" in handlers:
        # The api handler's import defers the resolver and the clients to its first request
        # (or a SnapStart snapshot): what that first request builds, beside the import.
        wall, cpu = _median("import leasehold.handlers.api as h; h.prime()", runs)
        result["api_primed_ms"] = {"wall": round((wall - bare_wall) * 1000, 1),
                                   "cpu": round((cpu - bare_cpu) * 1000, 1)}
    return result


def _tree_size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def _zipped_size(path: Path, skip: Sequence[str] = ()) -> int:
    """Bytes of ``path`` zipped (deflate), leaving out the top-level entries named in ``skip``
    (and their ``.dist-info`` folders)."""
    def skipped(relative: Path) -> bool:
        top = relative.parts[0]
        return top in skip or top.split("-")[0] in skip or top.removesuffix(".py") in skip

    with tempfile.TemporaryDirectory() as tmp:
        archive = Path(tmp) / "asset.zip"
        with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as out:
            for file in sorted(path.rglob("*")):
                if file.is_file() and not skipped(file.relative_to(path)):
                    out.write(file, file.relative_to(path))
        return archive.stat().st_size


_BUNDLE = """
import sys
from pathlib import Path
from leasehold.cdk.code import BundleSpec, LocalBundler
spec = BundleSpec.resolve(code=[Path(sys.argv[1]) / "examples"], requirements=None,
                          task_modules=["examples.tasks"])
LocalBundler(spec).try_bundle(sys.argv[2], image=None)
"""


def _bundle_with_infra(out: Path) -> None:
    """The CDK app's own local bundling (pip for manylinux aarch64, as deployed)."""
    env = clean_env(JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION="1")
    subprocess.run([sys.executable, "-c", _BUNDLE, str(ROOT), str(out)], check=True, env=env,
                   cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=300)


def _name(requirement: str) -> str:
    match = re.match(r"[A-Za-z0-9_.-]+", requirement.strip())
    return match.group(0) if match else requirement


def _copy_installed(out: Path) -> None:
    """The runtime dependencies as installed in this virtualenv (no network)."""
    seen: set[str] = {"leasehold"}
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    todo = [_name(r) for r in project["dependencies"]]
    while todo:
        name = todo.pop()
        key = name.lower().replace("_", "-")
        if key in seen:
            continue
        seen.add(key)
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        todo += [_name(r) for r in dist.requires or [] if "extra ==" not in r]
        for file in dist.files or []:
            source = Path(str(file.locate()))
            if not source.is_file() or "__pycache__" in source.parts or \
                    source.suffix == ".pyc" or ".dist-info" in str(file):
                continue
            target = out / str(file)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    # The project itself is installed editable: copy it from the checkout.
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(ROOT / "functions" / "leasehold", out / "leasehold", ignore=ignore)
    shutil.copytree(ROOT / "examples", out / "examples", ignore=ignore)


def asset_size(method: str) -> dict[str, Any]:
    """Bytes of the Lambda code asset, unzipped and zipped (``method``: infra, venv or skip).

    ``skip`` (the smoke test's tiny profile) measures nothing and reports zeros.
    """
    if method == "skip":
        return {"method": "skip", "unzipped_bytes": 0, "zipped_bytes": 0,
                "zipped_bytes_without_runtime_provided": 0,
                "largest_packages_unzipped_bytes": {}}
    with tempfile.TemporaryDirectory(prefix="leasehold-bench-asset-") as tmp:
        out = Path(tmp) / "asset"
        out.mkdir()
        used = method
        error = None
        if method == "infra":
            try:
                _bundle_with_infra(out)
            except (subprocess.SubprocessError, OSError) as exc:
                error = getattr(exc, "stderr", None) or str(exc)
                shutil.rmtree(out)
                out.mkdir()
                used = "venv"
        if used == "venv":
            _copy_installed(out)
        largest = sorted(((_tree_size(p), p.name) for p in out.iterdir() if p.is_dir()),
                         reverse=True)[:5]
        result: dict[str, Any] = {
            "method": used,
            "unzipped_bytes": _tree_size(out), "zipped_bytes": _zipped_size(out),
            # What the zip would be if it relied on the runtime's boto3 (not the deployed shape).
            "zipped_bytes_without_runtime_provided": _zipped_size(out, RUNTIME_PROVIDED),
            "largest_packages_unzipped_bytes": {name: size for size, name in largest},
        }
        if error:
            result["infra_bundling_error"] = str(error)[-500:]
        return result


__all__ = ["HANDLERS", "asset_size", "import_times"]
