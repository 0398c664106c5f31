"""The files of a new project (``leasehold init``): tasks, their tests, a CDK app, a README.

Each file is a :class:`string.Template` over ``$package`` (the task package), ``$prefix``
(the deployment's resource-name prefix) and ``$stack`` (the CloudFormation stack name).
"""

from __future__ import annotations

from string import Template

FILES: dict[str, str] = {
    "$package/__init__.py": '''\
"""$package: tasks run by Leasehold."""
''',
    "$package/tasks.py": '''\
"""The tasks: each ``@task`` function runs as a job, called as ``fn(payload, ctx)``.

Add modules beside this one and name them in app.py's ``tasks=[...]``.
"""

from __future__ import annotations

from typing import Any

import humanize  # a dependency of the tasks: requirements.txt puts it in the Lambda bundle

from leasehold import JobContext, task


@task("$package.describe", max_attempts=3, timeout_seconds=60)
def describe(payload: Any, ctx: JobContext) -> dict[str, Any]:
    """Describes ``{"name": ..., "bytes": n}`` for people: ``1.5 MB``."""
    payload = payload or {}
    return {"name": payload.get("name"),
            "size": humanize.naturalsize(int(payload.get("bytes", 0)))}
''',
    "conftest.py": '''\
# The `leasehold` fixture (an in-process scheduler over moto) and `clock` (its time).
pytest_plugins = ["leasehold.testing.fixtures"]
''',
    "tests/test_tasks.py": '''\
"""The tasks' tests: a task is a function, and ``leasehold.testing`` runs it as a job would."""

from __future__ import annotations

from leasehold.testing import make_context, run_task

from $package import tasks


def test_describe_says_the_size_for_people() -> None:
    result = tasks.describe({"name": "report.pdf", "bytes": 1_500_000}, make_context())
    assert result == {"name": "report.pdf", "size": "1.5 MB"}


def test_describe_runs_as_a_job_under_its_task_name() -> None:
    # run_task finds the task by name, as a worker does, with its retries, its JSON encoding
    # and its size limits.
    assert run_task("$package.describe", {"name": "a", "bytes": 2048}) == {
        "name": "a", "size": "2.0 kB"}


def test_a_delayed_describe_runs_an_hour_later(leasehold, clock) -> None:
    # `leasehold`: an in-process scheduler (the job goes through its API, queues and
    # worker); `clock`: its time, which moves only when the test moves it.
    job = tasks.describe.submit({"name": "a", "bytes": 2048}, delay_seconds=3600)
    clock.advance(3599)
    assert job.status() == "SCHEDULED"
    clock.advance(1)  # no test waits an hour
    assert job.result() == {"name": "a", "size": "2.0 kB"}
''',
    "app.py": '''\
"""The CDK app: Leasehold's construct deploying this project's tasks.

``cdk synth`` / ``cdk deploy`` run it (cdk.json). Synth bundles the tasks with their
requirements for Lambda (arm64, Python 3.12, pip on this machine: no Docker) and imports every
task module from that bundle: a module that cannot be imported fails the synth, named.
"""

from __future__ import annotations

from pathlib import Path

import aws_cdk as cdk
from cdk_nag import AwsSolutionsChecks, ServerlessChecks

from leasehold.cdk import Leasehold, LeaseholdConfig, PoolConfig

HERE = Path(__file__).resolve().parent


def main() -> None:
    app = cdk.App()
    stack = cdk.Stack(app, "$stack")
    jobs = Leasehold(
        stack, "Jobs",
        code=[HERE / "$package"],
        tasks=["$package.tasks"],
        requirements=HERE / "requirements.txt",
        # kind="ecs" for jobs longer than Lambda's 15 minutes (an image is built from the
        # same bundle at deploy, with Docker).
        pools=[PoolConfig(name="default", timeout_seconds=300)],
        # The tasks your application submits: synth fails unless they are registered.
        required_tasks=["$package.describe"],
        config=LeaseholdConfig(prefix="$prefix"),
    )
    cdk.CfnOutput(stack, "ApiUrl", value=jobs.api.url, description="Leasehold's REST API")
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app), ServerlessChecks(app))
    app.synth()


if __name__ == "__main__":
    main()
''',
    "cdk.json": '''\
{
  "app": "python3 app.py",
  "watch": {"include": ["app.py", "$package/**", "requirements.txt"]}
}
''',
    "requirements.txt": '''\
# The tasks' own dependencies. Synth installs them into the Lambda bundle for arm64 Python
# 3.12 (pure-Python packages, or ones with manylinux aarch64 wheels).
humanize>=4,<5
''',
    "requirements-dev.txt": '''\
# What this project needs on your machine: Leasehold with its CDK construct (the `cdk`
# extra) and its local runtime (`leasehold dev`, the pytest fixture: the `local` extra,
# moto), and pytest. Leasehold is named by the version `leasehold init` ran as; to install
# it from a wheel you built or were given, point pip at the folder holding it:
#   pip install --find-links ../wheels -r requirements-dev.txt
# (or set PIP_FIND_LINKS=../wheels in the environment).
-r requirements.txt
$leasehold
pytest>=8
''',
    "pyproject.toml": '''\
[tool.pytest.ini_options]
# The task package is imported from the project folder.
pythonpath = ["."]
testpaths = ["tests"]
''',
    ".gitignore": '''\
.venv/
cdk.out/
.leasehold/
__pycache__/
''',
    "README.md": '''\
# $package

Background jobs for this application, run by Leasehold on AWS
managed services: tasks in `$package/`, deployed by the CDK app in `app.py`.

| File | What it is |
| --- | --- |
| `$package/tasks.py` | the tasks: `@task("$package.describe")` functions |
| `tests/test_tasks.py` | their tests (pytest; `leasehold.testing` runs a task as a job would) |
| `conftest.py` | the tests' fixtures: an in-process scheduler (`leasehold`), its `clock` |
| `requirements.txt` | the tasks' dependencies, bundled into the deployment |
| `requirements-dev.txt` | Leasehold with its CDK construct and local runtime, and pytest |
| `app.py`, `cdk.json` | the CDK app: Leasehold's construct with your tasks |

## Set up and test

    python3 -m venv .venv && . .venv/bin/activate
    pip install -r requirements-dev.txt
    pytest

`requirements-dev.txt` names Leasehold by version. To install it from a wheel rather than an
index (one you built with `python -m build` in Leasehold's checkout, or were given), point pip
at the folder that holds it:

    pip install --find-links ../wheels -r requirements-dev.txt

## Run it on this machine

    leasehold dev --tasks $package.tasks
    leasehold submit $package.describe '{"name": "report.pdf", "bytes": 1500000}' --wait

`leasehold dev` runs the API, workers, sweeper and ticker against an embedded AWS emulator.

## Deploy

    npx aws-cdk@2 bootstrap     # once per account and region
    npx aws-cdk@2 deploy

Synth installs `requirements.txt` beside Leasehold's own dependencies for Lambda (arm64,
Python 3.12) with pip on this machine (no Docker), copies `$package/` in, and imports every
task module from that bundle: a module that does not import (a dependency missing from
`requirements.txt`, say) fails the synth and names the module. An ECS pool
(`PoolConfig(kind="ecs")`) gets an image built from the same bundle, which needs Docker at
deploy. The stack's `ApiUrl` output is the API your application submits jobs to.

## Add a task

Write another `@task("$package.name")` function (or module: add it to `tasks=[...]` in
`app.py`), test it in `tests/`, and list it in `required_tasks` if your application submits it.
''',
}


def render(path: str, text: str, **values: str) -> tuple[str, str]:
    """One file's path and content with ``values`` filled in."""
    return Template(path).substitute(values), Template(text).substitute(values)
