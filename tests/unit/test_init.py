"""``leasehold init``: a new project in a new or empty folder; bad input is refused by name
and nothing is written."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import tarfile
from pathlib import Path

import pytest

import leasehold
from leasehold.cli import main
from leasehold.cli.init import init_project, leasehold_requirement, package_name
from leasehold.errors import ValidationError


@pytest.mark.parametrize(("folder", "package"), [
    ("billing", "billing"), ("my-app", "my_app"), ("Reports 2", "reports_2"),
    ("2fast", "app_2fast"),
])
def test_the_package_is_named_after_the_folder(folder: str, package: str) -> None:
    assert package_name(folder) == package


def test_init_writes_tasks_tests_a_cdk_app_and_a_readme_named_for_the_package(
        tmp_path: Path) -> None:
    created = init_project(tmp_path / "new", package="billing_jobs")
    assert {"billing_jobs/tasks.py", "tests/test_tasks.py", "app.py", "requirements.txt",
            "README.md", "cdk.json"} <= set(created)
    app = (tmp_path / "new" / "app.py").read_text()
    assert 'tasks=["billing_jobs.tasks"]' in app
    assert 'prefix="billing-jobs"' in app and 'cdk.Stack(app, "BillingJobs")' in app
    compile(app, "app.py", "exec")
    compile((tmp_path / "new" / "billing_jobs" / "tasks.py").read_text(), "tasks.py", "exec")
    assert "$" not in "".join((tmp_path / "new" / path).read_text() for path in created)


def test_init_refuses_a_folder_that_holds_anything_and_changes_nothing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "notes.txt").write_text("mine")
    assert main(["init", str(tmp_path)]) == 2
    assert "is not an empty folder" in capsys.readouterr().err
    assert [p.name for p in tmp_path.iterdir()] == ["notes.txt"]


@pytest.mark.parametrize(("package", "message"), [
    ("my-jobs", "not a lower-case Python package name"),
    ("class", "not a lower-case Python package name"),
    ("Billing", "not a lower-case Python package name"),
    ("json", "would hide the module"),
    ("leasehold", "would hide the module"),
])
def test_init_refuses_a_package_name_that_cannot_work(tmp_path: Path, package: str,
                                                     message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        init_project(tmp_path / "new", package=package)
    assert not (tmp_path / "new").exists()


def test_requirements_dev_names_leasehold_by_version_and_no_path(tmp_path: Path) -> None:
    """Issue 47: run from a source checkout (as here), init used to write ``-e <checkout>``,
    an absolute path that tied the project to the clone. It names the version that ran, with
    the extras a project needs, and says how to install it from a folder of wheels."""
    checkout = Path(leasehold.__file__).resolve().parents[2]
    init_project(tmp_path / "new", package="billing")
    written = "".join(p.read_text() for p in (tmp_path / "new").rglob("*") if p.is_file())
    assert str(checkout) not in written and str(tmp_path) not in written
    lines = (tmp_path / "new" / "requirements-dev.txt").read_text().splitlines()
    assert f"leasehold[cdk,local]=={importlib.metadata.version('leasehold')}" in lines
    assert leasehold_requirement() == f"leasehold[cdk,local]=={leasehold.__version__}"
    assert any("--find-links" in line for line in lines if line.startswith("#"))
    assert "--find-links" in (tmp_path / "new" / "README.md").read_text()


def _recommended_flags_of_installed_aws_cdk_lib() -> tuple[str, dict[str, object]]:
    """What ``cdk init`` would write: the installed aws-cdk-lib's own
    ``recommended-feature-flags.json`` (inside the jsii tarball its Python package ships)."""
    spec = importlib.util.find_spec("aws_cdk")
    assert spec is not None and spec.origin is not None
    (tarball,) = (Path(spec.origin).parent / "_jsii").glob("aws-cdk-lib@*.jsii.tgz")
    with tarfile.open(tarball) as archive:
        member = archive.extractfile("package/recommended-feature-flags.json")
        assert member is not None
        flags = json.load(member)
    return tarball.name.split("@", 1)[1].removesuffix(".jsii.tgz"), flags


def test_cdk_json_sets_the_recommended_feature_flags_as_cdk_init_does(tmp_path: Path) -> None:
    """Issue 47: init's cdk.json set no flags, so every synth warned that 85 were unset."""
    version, recommended = _recommended_flags_of_installed_aws_cdk_lib()
    init_project(tmp_path / "new", package="billing")
    app = json.loads((tmp_path / "new" / "cdk.json").read_text())
    assert app["app"] == "python3 app.py" and "billing/**" in app["watch"]["include"]
    assert app["context"] == recommended, (
        f"aws-cdk-lib {version} recommends other flags: copy its recommended-feature-flags.json "
        "into functions/leasehold/cli/cdk_feature_flags.json")
