"""What the `leasehold dev` banner says about where its data lives (issue 14)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from leasehold.local.options import RuntimeOptions
from leasehold.local.runtime import Runtime


def line(embedded: bool, **options: Any) -> str:
    runtime = Runtime(RuntimeOptions(**options))
    runtime.emulator = object() if embedded else None  # type: ignore[assignment]
    return runtime._state_line()


def test_the_banner_says_when_data_is_in_memory_only() -> None:
    assert "IN MEMORY ONLY" in line(True, state_dir=None)
    assert "lost when you stop" in line(True, state_dir=None)


def test_the_banner_names_the_state_file(tmp_path: Path) -> None:
    said = line(True, state_dir=str(tmp_path))
    assert str(tmp_path / "state.json") in said and "--fresh" in said


def test_another_endpoint_keeps_its_own_data() -> None:
    said = line(False, endpoint="http://localhost:4566")
    assert said == "kept by http://localhost:4566"

