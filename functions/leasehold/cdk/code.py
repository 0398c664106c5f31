"""The code bundle: Leasehold, the application's task code and both sets of dependencies.

One folder, built once per synth, is what every function runs and what an ECS pool's image is
built from. CDK local bundling runs ``pip`` on this machine instead of in a Docker container:
``pip install --platform manylinux2014_aarch64`` fetches exactly the wheels Lambda's arm64
Python 3.12 needs. Leasehold's requirements and the application's are installed in one pip
run, so one resolver picks versions that satisfy both.

The ``leasehold`` package is copied from where this module is installed, without
``leasehold.cdk`` (the CDK code never runs on Lambda, and aws-cdk-lib is not in the bundle).
The application's packages are copied under their own names from wherever they are.
Then every task module is imported from the finished bundle (:mod:`leasehold.cdk.taskcheck`):
a synth never succeeds with a bundle that cannot run the tasks.

``install=False`` (``bundling="source"``) skips pip: tests use it because they never run the
code and a pip install (network, ~20 s) would dominate their run time.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import jsii
from aws_cdk import aws_lambda as lambda_

import leasehold
from leasehold.cdk.taskcheck import check_tasks

#: The installed ``leasehold`` package, which the bundle carries.
PACKAGE = Path(leasehold.__file__).resolve().parent
RUNTIME = lambda_.Runtime.PYTHON_3_12
ARCHITECTURE = lambda_.Architecture.ARM_64
#: The wheel tags pip must pick so that compiled dependencies load on Lambda's arm64 image.
PIP_PLATFORM = ("--platform", "manylinux2014_aarch64", "--implementation", "cp",
                "--python-version", "3.12", "--only-binary=:all:")
_IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", ".pytest_cache",
                                 ".mypy_cache", ".ruff_cache")
#: What the Lambda Python runtime already ships (the AWS SDK and its dependencies). Leaving
#: them out halves the asset and the cold start's import work; the code needs nothing newer
#: than the runtime's SDK (conditional-check return values, 2023). Import names: pip keeps
#: one folder (or module) per name plus its ``*.dist-info``.
RUNTIME_PROVIDED = ("boto3", "botocore", "s3transfer", "jmespath", "urllib3", "dateutil", "six")


@dataclass(frozen=True, kw_only=True)
class BundleSpec:
    """What goes into the bundle and what it must be able to run."""

    #: The application's packages (folders) or modules (``.py`` files), absolute.
    code: tuple[Path, ...]
    task_modules: tuple[str, ...]
    #: A pip requirements file for the application's own dependencies.
    requirements: Path | None = None
    #: Task names the application submits: each must be registered by a task module.
    required_tasks: tuple[str, ...] = ()
    #: The deployment's pools: every registered task must run in one of them.
    pools: tuple[str, ...] = ("default",)
    #: ``False``: copy the code only (tests); the check then borrows this interpreter's
    #: installed packages for the dependencies.
    install: bool = True

    @classmethod
    def resolve(cls, *, code: Sequence[str | os.PathLike[str]], requirements: str | None,
                task_modules: Sequence[str], **values: Any) -> BundleSpec:
        """Resolve paths (relative ones against the working directory, as ``cdk`` runs) and
        refuse the ones that do not exist, before any bundling starts."""
        if not task_modules:
            raise ValueError('name at least one task module (tasks=["myapp.tasks"])')
        paths = tuple(Path(path).expanduser().resolve() for path in code)
        for given, path in zip(code, paths, strict=True):
            if not path.exists():
                raise ValueError(f"task code {os.fspath(given)!r} does not exist ({path})")
            if path.is_file() and path.suffix != ".py":
                raise ValueError(f"task code {os.fspath(given)!r} is neither a package folder "
                                 "nor a .py module")
        names = [_import_name(path) for path in paths]
        clashes = {name for name in names if names.count(name) > 1 or name == "leasehold"}
        if clashes:
            raise ValueError(f"task code names must be unique and not 'leasehold': "
                             f"{sorted(clashes)}")
        required = None
        if requirements:
            required = Path(requirements).expanduser().resolve()
            if not required.is_file():
                raise ValueError(f"requirements file {requirements!r} does not exist "
                                 f"({required})")
        return cls(code=paths, requirements=required, task_modules=tuple(task_modules),
                   **values)


@jsii.implements(cdk.ILocalBundling)
class LocalBundler:
    """Builds the bundle into CDK's output folder, then proves it imports the tasks."""

    def __init__(self, spec: BundleSpec, python: str = sys.executable) -> None:
        self.spec = spec
        self.python = python

    def try_bundle(self, output_dir: str, *, image: cdk.DockerImage, **_: Any) -> bool:
        out = Path(output_dir)
        # What the Lambda runtime provides is left out of the bundle, but the check must
        # see it, as the function will: it goes here, on the check's path after the bundle.
        with tempfile.TemporaryDirectory(prefix="leasehold-runtime-") as provided:
            runtime = Path(provided) if self.spec.install else None
            if self.spec.install:
                requirements = [*leasehold_requirements()]
                if self.spec.requirements is not None:
                    requirements += ["-r", str(self.spec.requirements)]
                _run([self.python, "-m", "pip", "install", "--quiet", "--no-compile",
                      "--disable-pip-version-check", "--target", str(out), *PIP_PLATFORM,
                      *requirements])
                prune_runtime_provided(out, into=runtime)
            copy_leasehold(out)
            for path in self.spec.code:
                copy_code(path, out)
            check_tasks(out, task_modules=self.spec.task_modules, pools=self.spec.pools,
                        required_tasks=self.spec.required_tasks, isolated=self.spec.install,
                        python=self.python, runtime=runtime)
        return True


def bundling(spec: BundleSpec) -> cdk.BundlingOptions:
    return cdk.BundlingOptions(
        # Only used if local bundling declined, which it never does: it raises instead,
        # because a silent fall-back to Docker is what we promise not to need.
        image=RUNTIME.bundling_image,
        local=LocalBundler(spec),
    )


def leasehold_requirements() -> list[str]:
    """Leasehold's own run-time requirements (no extras): from ``pyproject.toml`` when this
    is a source checkout (an editable install may predate a new requirement), else from the
    installed distribution's metadata."""
    pyproject = PACKAGE.parent.parent / "pyproject.toml"
    if pyproject.is_file():
        project = tomllib.loads(pyproject.read_text())["project"]
        if project.get("name") == "leasehold":
            return list(project["dependencies"])
    return [requirement for requirement in metadata.requires("leasehold") or []
            if "extra ==" not in requirement.replace("'", '"').replace('"', "")]


def copy_leasehold(out: Path) -> None:
    """The ``leasehold`` package, without ``leasehold.cdk``."""
    def ignore(folder: str, names: list[str]) -> set[str]:
        skipped = set(_IGNORE(folder, names))
        return skipped | ({"cdk"} if Path(folder) == PACKAGE else set())

    shutil.copytree(PACKAGE, out / "leasehold", ignore=ignore)


def copy_code(path: Path, out: Path) -> None:
    """One package folder or module, under its own name (never the path it was given)."""
    target = out / path.name
    if target.exists():
        raise ValueError(f"task code {path.name!r} ({path}) has the same name as a package "
                         "already in the bundle (Leasehold or a dependency): rename it")
    if path.is_dir():
        shutil.copytree(path, target, ignore=_IGNORE)
    else:
        shutil.copy2(path, target)


def prune_runtime_provided(out: Path, *, into: Path | None = None) -> None:
    """Take the packages the Lambda runtime provides out of a pip ``--target`` folder:
    deleted, or moved ``into`` a folder (where the synth-time import check finds them)."""
    for name in RUNTIME_PROVIDED:
        distribution = "python_dateutil" if name == "dateutil" else name
        for path in (out / name, out / f"{name}.py", *out.glob(f"{distribution}-*.dist-info")):
            if not path.exists():
                continue
            if into is not None:
                shutil.move(path, into / path.name)
            elif path.is_dir():
                shutil.rmtree(path)
            else:
                path.unlink()
    # pip --target leaves console scripts of the dependencies here; nothing runs them.
    shutil.rmtree(out / "bin", ignore_errors=True)


def _import_name(path: Path) -> str:
    return path.stem if path.is_file() else path.name


def _run(command: list[str]) -> None:
    with tempfile.TemporaryDirectory(prefix="leasehold-pip-") as cwd:
        # A neutral working directory: pip must not pick up a project's pip.conf or setup.
        result = subprocess.run(command, capture_output=True, text=True, check=False, cwd=cwd)
    if result.returncode != 0:
        raise RuntimeError(
            f"bundling the Lambda code failed: {' '.join(command)}\n{result.stderr}")
