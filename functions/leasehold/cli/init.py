"""``leasehold init DIR``: a new project with tasks, their tests, a CDK app and a README."""

from __future__ import annotations

import argparse
import json
import keyword
import re
import sys
from pathlib import Path
from typing import Any

import leasehold
from leasehold.cli.parsing import command
from leasehold.cli.scaffold import FILES, render
from leasehold.errors import ValidationError


def register(subparsers: Any) -> None:
    init = command(subparsers, "init", "create a new project: a task package, its tests, a CDK "
                                       "app that deploys it and a README", [
        "leasehold init billing",
        "leasehold init ~/src/reports --package report_jobs",
    ], run_init, client=False)
    init.add_argument("directory", help="the new project's folder (new, or empty)")
    init.add_argument("--package", default=None,
                      help="the task package's name (default: from the folder's name), "
                           "e.g. --package billing_jobs")


def run_init(args: argparse.Namespace) -> int:
    target = Path(args.directory).expanduser()
    package = args.package or package_name(target.resolve().name)
    try:
        created = init_project(target, package=package)
    except ValidationError as exc:
        print(f"leasehold init: {exc}", file=sys.stderr)
        return 2
    print(f"Created a Leasehold project in {target}/:")
    for path in created:
        print(f"  {path}")
    print(f"\nNext:\n  cd {target}\n  python3 -m venv .venv && . .venv/bin/activate\n"
          f"  pip install -r requirements-dev.txt   # add --find-links DIR for a folder of "
          f"wheels\n  pytest\n"
          f"  leasehold dev --tasks {package}.tasks\n  npx aws-cdk@2 deploy")
    return 0


def package_name(folder: str) -> str:
    """A Python package name from a folder name: ``my-app`` -> ``my_app``."""
    name = re.sub(r"[^0-9a-zA-Z_]+", "_", folder).strip("_").lower()
    return f"app_{name}" if name[:1].isdigit() else name


def init_project(target: Path, *, package: str) -> list[str]:
    """Write the project's files into ``target`` (new or empty); the paths written."""
    check_package(package)
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise ValidationError("directory", f"{target} exists and is not an empty folder: "
                                           "init only writes into a new or empty one")
    words = [part for part in re.split(r"[^0-9a-zA-Z]+", package) if part]
    values = {"package": package,
              "prefix": "-".join(word.lower() for word in words),
              "stack": "".join(word[:1].upper() + word[1:] for word in words),
              "leasehold": leasehold_requirement()}
    created = []
    for template_path, template_text in FILES.items():
        path, text = render(template_path, template_text, **values)
        if path == "cdk.json":
            text = with_feature_flags(text)
        (target / path).parent.mkdir(parents=True, exist_ok=True)
        (target / path).write_text(text)
        created.append(path)
    return created


def leasehold_requirement() -> str:
    """The requirement line that installs this Leasehold with its CDK construct and its
    local runtime's emulator (``leasehold dev``, the pytest fixture), by version: never a
    path, so the project works from any copy of Leasehold's package (an index, or a folder
    of wheels named with ``pip install --find-links``)."""
    return f"leasehold[cdk,local]=={leasehold.__version__}"


#: aws-cdk-lib's recommended feature flags, which ``cdk init`` writes into a new app's
#: cdk.json (without them synth warns of every flag left unset). A copy of the file
#: ``recommended-feature-flags.json`` of the aws-cdk-lib version it names;
#: tests/unit/test_init.py checks it against the installed aws-cdk-lib.
FEATURE_FLAGS = Path(__file__).with_name("cdk_feature_flags.json")


def with_feature_flags(cdk_json: str) -> str:
    """``cdk.json`` with the recommended feature flags as its context, as ``cdk init``."""
    app = json.loads(cdk_json)
    app["context"] = json.loads(FEATURE_FLAGS.read_text())["context"]
    return json.dumps(app, indent=2) + "\n"


def check_package(package: str) -> None:
    if not package.isidentifier() or keyword.iskeyword(package) or package != package.lower():
        raise ValidationError("package", f"{package!r} is not a lower-case Python package "
                                         "name: give one with --package, e.g. --package my_jobs")
    if package in ("leasehold", "tests") or package in sys.stdlib_module_names:
        raise ValidationError("package", f"{package!r} would hide the module of that name: "
                                         "give another with --package")
