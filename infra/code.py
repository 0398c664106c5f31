"""The Lambda code asset: the ``leasehold`` distribution and its dependencies, for arm64.

CDK local bundling runs ``pip`` on this machine instead of in a Docker container: the
dependencies are pure Python or ship manylinux aarch64 wheels, so ``pip install --platform``
produces exactly what the Lambda runtime needs without Docker.

``bundling="source"`` skips pip and ships the bare ``functions/`` folder. Tests use it because
they never run the code and a pip install (network, ~20 s) would dominate their run time.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import tomllib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import jsii
from aws_cdk import aws_lambda as lambda_

from infra.config import BundlingMode

ROOT = Path(__file__).resolve().parent.parent
RUNTIME = lambda_.Runtime.PYTHON_3_12
ARCHITECTURE = lambda_.Architecture.ARM_64
#: The wheel tags pip must pick so that compiled dependencies load on Lambda's arm64 image.
PIP_PLATFORM = ("--platform", "manylinux2014_aarch64", "--implementation", "cp",
                "--python-version", "3.12", "--only-binary=:all:")
#: Never part of the bundle; pruned before fingerprinting so synth does not walk .venv.
EXCLUDE = [".venv", ".git", "cdk.out", "node_modules", "tests", "docs", "infra", "build",
           ".mypy_cache", ".ruff_cache", ".pytest_cache", ".hypothesis", ".leasehold", ".ci",
           "**/__pycache__", "*.egg-info", "*.pyc"]
_IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
#: What the Lambda Python runtime already ships (the AWS SDK and its dependencies). Leaving
#: them out halves the asset and the cold start's import work; the code needs nothing newer
#: than the runtime's SDK (conditional-check return values, 2023). Import names: pip keeps
#: one folder (or module) per name plus its ``*.dist-info``.
RUNTIME_PROVIDED = ("boto3", "botocore", "s3transfer", "jmespath", "urllib3", "dateutil", "six")


@jsii.implements(cdk.ILocalBundling)
class PipBundler:
    """Installs the project and its runtime dependencies into the asset directory."""

    def __init__(self, root: Path, task_packages: Sequence[str],
                 python: str = sys.executable) -> None:
        self.root = root
        self.task_packages = tuple(task_packages)
        self.python = python

    def try_bundle(self, output_dir: str, *, image: cdk.DockerImage, **_: Any) -> bool:
        out = Path(output_dir)
        with tempfile.TemporaryDirectory(prefix="leasehold-bundle-") as tmp:
            # Build from a clean copy so pip's in-tree build never writes into the checkout.
            source = Path(tmp) / "src"
            source.mkdir()
            for name in ("pyproject.toml", "README.md"):
                shutil.copy2(self.root / name, source / name)
            shutil.copytree(self.root / "functions", source / "functions", ignore=_IGNORE)
            if (self.root / "examples").is_dir():
                # pyproject maps the ``examples`` package dir; setuptools wants it present.
                shutil.copytree(self.root / "examples", source / "examples", ignore=_IGNORE)
            project = tomllib.loads((self.root / "pyproject.toml").read_text())["project"]
            pip = [self.python, "-m", "pip", "install", "--quiet", "--no-compile",
                   "--disable-pip-version-check", "--target", str(out)]
            self._run([*pip, *PIP_PLATFORM, *project["dependencies"]])
            self._run([*pip, "--no-deps", str(source)])
        prune_runtime_provided(out)
        for package in self.task_packages:
            target = out / package
            if not target.exists():
                shutil.copytree(self.root / package, target, ignore=_IGNORE)
        return True

    @staticmethod
    def _run(command: list[str]) -> None:
        result = subprocess.run(command, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            raise RuntimeError(
                f"bundling the Lambda code failed: {' '.join(command)}\n{result.stderr}")


def prune_runtime_provided(out: Path) -> None:
    """Delete the packages the Lambda runtime provides from a pip ``--target`` folder."""
    for name in RUNTIME_PROVIDED:
        for path in (out / name, out / f"{name}.py"):
            if path.is_dir():
                shutil.rmtree(path)
            elif path.exists():
                path.unlink()
        distribution = "python_dateutil" if name == "dateutil" else name
        for info in out.glob(f"{distribution}-*.dist-info"):
            shutil.rmtree(info)


def lambda_code(*, mode: BundlingMode, task_packages: Sequence[str],
                root: Path = ROOT) -> lambda_.Code:
    """One code asset shared by every function (one bundle, one upload)."""
    if mode == "source":
        return lambda_.Code.from_asset(str(root / "functions"), exclude=EXCLUDE)
    return lambda_.Code.from_asset(
        str(root),
        exclude=EXCLUDE,
        bundling=cdk.BundlingOptions(
            # Only used if local bundling declined, which it never does: it raises instead,
            # because a silent fall-back to Docker is what we promise not to need.
            image=RUNTIME.bundling_image,
            local=PipBundler(root, task_packages),
        ),
    )
