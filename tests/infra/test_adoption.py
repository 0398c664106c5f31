"""An application deploys Leasehold from its own folder: its CDK app, its tasks, its
requirement. Real bundling (pip for Lambda's arm64 Python 3.12, from PyPI) in a subprocess,
as ``cdk synth`` runs the app; the bundle must hold the tasks and their dependency.

A project from ``leasehold init`` synthesizes its tasks here too; its whole journey from the
built wheel, installed into its own virtualenv (its tests, ``leasehold dev``, a job and its
synth), is tests/e2e/test_init_venv.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.infra

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "adoption"


def _env(**extra: str) -> dict[str, str]:
    """Leasehold importable as if installed (``functions/`` only: not the checkout's root,
    so nothing of the repository's own leaks in)."""
    return {**os.environ, "PYTHONPATH": str(ROOT / "functions"),
            "JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION": "1", **extra}


@dataclass(frozen=True)
class Synth:
    template: dict[str, Any]
    bundle: Path
    image_context: Path | None


def _synth(app: Path, outdir: Path, stack: str) -> Synth:
    """``python app.py`` as ``cdk synth`` runs it (the CLI sets CDK_OUTDIR), from elsewhere."""
    result = subprocess.run([sys.executable, str(app)], cwd=outdir.parent, capture_output=True,
                            text=True, check=False, env=_env(CDK_OUTDIR=str(outdir)),
                            timeout=900)
    assert result.returncode == 0, result.stderr[-4000:]
    manifest = json.loads((outdir / f"{stack}.assets.json").read_text())
    (code,) = [outdir / asset["source"]["path"] for asset in manifest["files"].values()
               if asset["source"].get("packaging") == "zip"]
    images = [outdir / image["source"]["directory"]
              for image in manifest.get("dockerImages", {}).values()]
    return Synth(template=json.loads((outdir / f"{stack}.template.json").read_text()),
                 bundle=code, image_context=images[0] if images else None)


def _environment_of_functions(template: dict[str, Any]) -> list[dict[str, Any]]:
    return [resource["Properties"]["Environment"]["Variables"]
            for resource in template["Resources"].values()
            if resource["Type"] == "AWS::Lambda::Function"
            and str(resource["Properties"].get("Handler", "")).startswith("leasehold.")]


def _assert_bundle_runs(bundle: Path, package: str, tasks: str) -> None:
    assert (bundle / package / "tasks.py").read_text() == tasks
    assert (bundle / "humanize" / "__init__.py").is_file()  # the tasks' own requirement
    assert (bundle / "leasehold" / "handlers" / "worker.py").is_file()
    assert list((bundle / "pydantic_core").glob("*aarch64*.so")), "not built for arm64"
    assert not (bundle / "leasehold" / "cdk").exists()
    assert not (bundle / "boto3").exists()  # the Lambda runtime provides it


def test_an_application_folder_deploys_its_tasks_and_their_dependency(tmp_path: Path) -> None:
    synth = _synth(EXAMPLE / "app.py", tmp_path / "cdk.out", "Greeter")
    _assert_bundle_runs(synth.bundle, "greeter",
                        (EXAMPLE / "greeter" / "tasks.py").read_text())
    environments = _environment_of_functions(synth.template)
    assert len(environments) >= 5
    assert {env["LEASEHOLD_TASKS"] for env in environments} == {"greeter.tasks"}
    # The ECS pool's image is built from the same bundle.
    assert synth.image_context is not None
    built = synth.image_context / "bundle"
    assert (built / "greeter" / "tasks.py").is_file()
    assert (built / "humanize" / "__init__.py").is_file()


def test_the_applications_own_tests_sleep_an_hour_in_milliseconds() -> None:
    """examples/adoption's tests, run as the application runs them (plain ``pytest`` in its
    folder): its durable task's one-hour sleep on the test clock, its own ``Client()``
    reaching the in-process scheduler, and its typed task refused at submission."""
    tested = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
                            cwd=EXAMPLE, capture_output=True, text=True, check=False,
                            env=_env(), timeout=300)
    assert tested.returncode == 0, tested.stdout[-3000:]
    assert "3 passed" in tested.stdout


def test_a_project_whose_requirements_miss_a_dependency_fails_synth_naming_the_module(
        tmp_path: Path) -> None:
    project = tmp_path / "reports"
    subprocess.run([sys.executable, "-m", "leasehold.cli", "init", str(project)],
                   check=True, capture_output=True, env=_env())
    (project / "requirements.txt").write_text("# humanize forgotten\n")
    result = subprocess.run([sys.executable, str(project / "app.py")], cwd=tmp_path,
                            capture_output=True, text=True, check=False,
                            env=_env(CDK_OUTDIR=str(tmp_path / "cdk.out")), timeout=900)
    assert result.returncode != 0
    assert ("task module 'reports.tasks' cannot be imported from the bundle: "
            "ModuleNotFoundError: No module named 'humanize'") in result.stderr


def test_a_task_module_that_imports_boto3_through_leasehold_workflows_synthesizes(
        tmp_path: Path) -> None:
    """The README's ``step_results`` example: ``leasehold.workflows`` imports boto3, which the
    bundle leaves out because Lambda provides it. The synth's import check sees what the
    runtime provides, and nothing more: a package neither has still fails it."""
    project = tmp_path / "steps"
    subprocess.run([sys.executable, "-m", "leasehold.cli", "init", str(project)],
                   check=True, capture_output=True, env=_env())
    tasks = (project / "steps" / "tasks.py")
    tasks.write_text(tasks.read_text() + '''

from leasehold.workflows import step_results


@task("add-inputs")
def add_inputs(payload, ctx):
    return int(payload or 0) + sum(step_results(ctx).values())
''')
    synth = _synth(project / "app.py", tmp_path / "cdk.out", "Steps")
    assert not (synth.bundle / "boto3").exists()  # still left to the runtime
    assert (synth.bundle / "steps" / "tasks.py").read_text() == tasks.read_text()

    tasks.write_text(tasks.read_text() + "\nimport requests  # neither bundled nor provided\n")
    result = subprocess.run([sys.executable, str(project / "app.py")], cwd=tmp_path,
                            capture_output=True, text=True, check=False,
                            env=_env(CDK_OUTDIR=str(tmp_path / "cdk.out2")), timeout=900)
    assert result.returncode != 0
    assert ("task module 'steps.tasks' cannot be imported from the bundle: "
            "ModuleNotFoundError: No module named 'requests'") in result.stderr
