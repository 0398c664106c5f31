"""The ``Leasehold`` construct's bundle: the application's tasks are in it, from any path, and
a synth whose bundle cannot run them fails, naming the module or the task.

These synthesize with ``bundling="source"`` (no pip; the check borrows this interpreter's
packages); ``test_adoption.py`` does the real pip bundling.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import aws_cdk as cdk
import pytest

import leasehold
from infra.app import build
from leasehold.cdk import Leasehold, LeaseholdConfig
from leasehold.cdk.taskcheck import TaskCheckError, check_tasks
from tests.infra.conftest import FEATURE_FLAGS, Synthesized

pytestmark = pytest.mark.infra

SOURCE = LeaseholdConfig(bundling="source", waf=False)
TASKS = """\
from leasehold import task


@task("myapp.hello")
def hello(payload, ctx):
    return "hello"
"""


def _package(root: Path, tasks: str = TASKS, name: str = "myapp") -> Path:
    package = root / name
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "tasks.py").write_text(tasks)
    return package


def _app(tmp_path: Path) -> tuple[cdk.App, cdk.Stack]:
    app = cdk.App(outdir=str(tmp_path / "cdk.out"), context=FEATURE_FLAGS)
    return app, cdk.Stack(app, "App")


def _bundle_dir(app: cdk.App, jobs: Leasehold) -> Path:
    path = Path(jobs.bundle.asset_path)
    return path if path.is_absolute() else Path(app.outdir) / path


def test_task_code_given_by_an_absolute_path_is_in_the_bundle(tmp_path: Path) -> None:
    # `make synth -c taskPackages=/abs/path/myapp -c tasks=myapp.tasks` shipped a bundle
    # without myapp: the absolute path was joined onto the output folder and the copy skipped.
    package = _package(tmp_path / "elsewhere")
    app = cdk.App(outdir=str(tmp_path / "cdk.out"), context={
        **FEATURE_FLAGS, "taskPackages": str(package), "tasks": "myapp.tasks",
        "leasehold:bundling": "source", "waf": "false"})
    stack = build(app, nag=False)
    bundle = _bundle_dir(app, stack.leasehold)
    assert (bundle / "myapp" / "tasks.py").read_text() == TASKS
    assert (bundle / "leasehold" / "handlers" / "worker.py").is_file()


def test_task_code_given_by_a_relative_path_is_found_from_the_working_directory(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _package(tmp_path / "project")
    monkeypatch.chdir(tmp_path / "project")
    app, stack = _app(tmp_path)
    jobs = Leasehold(stack, "Jobs", code=["./myapp"], tasks=["myapp.tasks"], config=SOURCE)
    assert (_bundle_dir(app, jobs) / "myapp" / "tasks.py").is_file()


def test_the_bundle_leaves_the_cdk_code_out(synthesized: Synthesized) -> None:
    bundle = _bundle_dir(synthesized.app, synthesized.stack.leasehold)
    assert (bundle / "examples" / "tasks.py").is_file()
    assert (bundle / "leasehold" / "__init__.py").is_file()
    assert not (bundle / "leasehold" / "cdk").exists()
    assert not list(bundle.rglob("aws_cdk"))


def test_the_import_check_leaves_no_bytecode_in_the_bundle(synthesized: Synthesized) -> None:
    # This machine's .pyc files are of no use on Lambda's Python 3.12 and only grow the asset.
    bundle = _bundle_dir(synthesized.app, synthesized.stack.leasehold)
    assert (bundle / "examples" / "tasks.py").is_file()
    assert list(bundle.rglob("__pycache__")) == []
    assert list(bundle.rglob("*.pyc")) == []


def test_a_task_module_that_cannot_be_imported_fails_synth_naming_it_and_the_error(
        tmp_path: Path) -> None:
    package = _package(tmp_path, "import a_package_nobody_installed\n" + TASKS)
    _, stack = _app(tmp_path)
    with pytest.raises(RuntimeError) as failure:
        Leasehold(stack, "Jobs", code=[package], tasks=["myapp.tasks"], config=SOURCE)
    assert ("task module 'myapp.tasks' cannot be imported from the bundle: "
            "ModuleNotFoundError: No module named 'a_package_nobody_installed'"
            ) in str(failure.value)


def test_a_task_module_whose_code_is_not_bundled_fails_synth(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # `-c tasks=myapp.tasks` alone: the functions would be told to import a module that is
    # not there (myapp is importable here, from the working directory, but not in the bundle).
    _package(tmp_path)
    monkeypatch.chdir(tmp_path)
    _, stack = _app(tmp_path)
    with pytest.raises(RuntimeError, match=r"'myapp\.tasks' cannot be imported from the "
                                           r"bundle: ModuleNotFoundError: No module named "
                                           r"'myapp'"):
        Leasehold(stack, "Jobs", tasks=["myapp.tasks"], config=SOURCE)


def test_a_required_task_that_no_module_registers_fails_synth_naming_it(
        tmp_path: Path) -> None:
    package = _package(tmp_path)
    _, stack = _app(tmp_path)
    with pytest.raises(RuntimeError, match=r"task 'myapp\.goodbye' is not registered by the "
                                           r"task modules myapp\.tasks \(they register: "
                                           r"myapp\.hello\)"):
        Leasehold(stack, "Jobs", code=[package], tasks=["myapp.tasks"],
                  required_tasks=["myapp.hello", "myapp.goodbye"], config=SOURCE)


def test_a_task_module_that_registers_no_task_fails_the_check_naming_it(
        tmp_path: Path) -> None:
    # tasks=["myapp"] with an empty myapp/__init__.py: it imports, and would deploy no task.
    _package(tmp_path)
    # The bundle holds Leasehold, as the construct's bundling puts it there.
    (tmp_path / "leasehold").symlink_to(Path(leasehold.__file__).parent)
    with pytest.raises(TaskCheckError, match=r"task module 'myapp' registers no task"):
        check_tasks(tmp_path, task_modules=["myapp"], pools=["default"], isolated=False)
    # A module whose tasks an earlier one already imported is not empty: it defines them.
    tasks = check_tasks(tmp_path, task_modules=["myapp.tasks", "myapp.tasks"],
                        pools=["default"], isolated=False)
    assert tasks == {"myapp.hello": {"module": "myapp.tasks", "pool": "default"}}


def test_a_task_in_a_pool_the_deployment_does_not_have_fails_synth(tmp_path: Path) -> None:
    package = _package(tmp_path, TASKS.replace('@task("myapp.hello")',
                                               '@task("myapp.hello", pool="gpu")'))
    _, stack = _app(tmp_path)
    with pytest.raises(RuntimeError, match=r"task 'myapp\.hello' \(module 'myapp\.tasks'\) "
                                           r"runs in pool 'gpu', which this deployment does "
                                           r"not have \(pools: default\)"):
        Leasehold(stack, "Jobs", code=[package], tasks=["myapp.tasks"], config=SOURCE)


@pytest.mark.parametrize(("values", "message"), [
    ({"tasks": []}, "name at least one task module"),
    ({"code": ["no/such/folder"]}, "task code 'no/such/folder' does not exist"),
    ({"requirements": "no-such-requirements.txt"},
     "requirements file 'no-such-requirements.txt' does not exist"),
])
def test_bad_construct_arguments_are_refused_by_name(
        tmp_path: Path, values: dict[str, object], message: str) -> None:
    package = _package(tmp_path)
    _, stack = _app(tmp_path)
    arguments: dict[str, object] = {"code": [package], "tasks": ["myapp.tasks"], **values}
    with pytest.raises((ValueError, RuntimeError), match=message):
        Leasehold(stack, "Jobs", config=SOURCE, **arguments)  # type: ignore[arg-type]


def test_an_ecs_pool_without_an_image_gets_one_built_from_the_bundle(
        synthesized: Synthesized) -> None:
    manifest = json.loads((synthesized.outdir
                           / f"{synthesized.stack.artifact_id}.assets.json").read_text())
    (image,) = manifest["dockerImages"].values()
    assert image["source"]["platform"] == "linux/arm64"
    context = synthesized.outdir / image["source"]["directory"]
    dockerfile = (context / "Dockerfile").read_text()
    assert "FROM --platform=linux/arm64 public.ecr.aws/docker/library/python:3.12-slim" \
        in dockerfile
    assert "COPY bundle/ /opt/leasehold/" in dockerfile
    assert "ENV PYTHONPATH=/opt/leasehold" in dockerfile
    # The same bundle the functions run: Leasehold and the tasks.
    lambda_bundle = _bundle_dir(synthesized.app, synthesized.stack.leasehold)
    for path in ("examples/tasks.py", "leasehold/handlers/worker.py", "leasehold/cli/dev.py"):
        assert (context / "bundle" / path).read_bytes() == (lambda_bundle / path).read_bytes()
    # The task definition runs that image, and the command it gives parses with that bundle
    # (the Dockerfile's `leasehold` is `python -m leasehold.cli`).
    (built,) = [task for task in synthesized.resources("AWS::ECS::TaskDefinition").values()
                if "built" in json.dumps(task["Properties"]["ContainerDefinitions"][0]
                                         ["Command"])]
    container = built["Properties"]["ContainerDefinitions"][0]
    assert "container-assets" in json.dumps(container["Image"])
    assert image["source"]["directory"].removeprefix("asset.") in json.dumps(container["Image"])
    assert container["Command"] == ["leasehold", "worker", "--pool", "built"]
    parsed = subprocess.run(
        [sys.executable, "-m", "leasehold.cli", *container["Command"][1:], "--help"],
        env={**os.environ, "PYTHONPATH": str(context / "bundle")}, cwd=context,
        capture_output=True, text=True, check=False)
    assert parsed.returncode == 0, parsed.stderr
    assert "--pool" in parsed.stdout
