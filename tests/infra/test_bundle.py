"""The code asset leaves out what the Lambda runtime ships, and nothing else."""

from __future__ import annotations

from pathlib import Path

from leasehold.cdk.code import RUNTIME_PROVIDED, prune_runtime_provided


def test_the_sdk_the_runtime_ships_is_pruned_and_our_dependencies_stay(tmp_path: Path) -> None:
    kept = ["leasehold", "aws_lambda_powertools", "pydantic", "croniter", "tzdata"]
    for name in [*RUNTIME_PROVIDED, *kept]:
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text("")
        info = "python_dateutil" if name == "dateutil" else name
        (tmp_path / f"{info}-1.0.dist-info").mkdir()
    (tmp_path / "six.py").write_text("")  # a single-module distribution
    prune_runtime_provided(tmp_path)
    left = sorted(p.name for p in tmp_path.iterdir())
    assert left == sorted([*kept, *(f"{name}-1.0.dist-info" for name in kept)])


def test_what_the_runtime_ships_can_be_moved_aside_for_the_import_check(tmp_path: Path) -> None:
    bundle, provided = tmp_path / "bundle", tmp_path / "provided"
    bundle.mkdir()
    provided.mkdir()
    for name in ("boto3", "pydantic"):
        (bundle / name).mkdir()
        (bundle / name / "__init__.py").write_text("")
    (bundle / "python_dateutil-2.9.dist-info").mkdir()
    prune_runtime_provided(bundle, into=provided)
    assert sorted(p.name for p in bundle.iterdir()) == ["pydantic"]
    assert sorted(p.name for p in provided.iterdir()) == ["boto3", "python_dateutil-2.9.dist-info"]
