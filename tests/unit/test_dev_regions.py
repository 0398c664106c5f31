"""The pieces of ``leasehold dev --regions`` that need no process: the isolation switch, the
isolated cell's API, and ``leasehold regions isolate`` finding (or not) a running drill."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from leasehold.aws.faults import switched
from leasehold.aws.isolation import ENV, IsolationSwitch
from leasehold.cells.drill import Layout, RegionsUnavailable, layout
from leasehold.cli import main
from leasehold.local.gateway import isolating


def test_the_switch_fails_or_hangs_every_call_only_while_its_file_says_so(
        tmp_path: Path) -> None:
    switch = IsolationSwitch(tmp_path / "a" / "isolated")
    fail, hang = switched({ENV: str(switch.path)})
    assert (fail.target, fail.kind, fail.times, hang.kind) == ("*", "fail", None, "hang")
    assert not fail.switch() and not hang.switch()  # type: ignore[misc]
    switch.set("hang")
    assert hang.switch() and not fail.switch()  # type: ignore[misc]
    switch.set("fail")
    assert fail.switch() and not hang.switch()  # type: ignore[misc]
    assert switch.clear() and not switch.clear()
    assert switched({}) == []


def test_an_isolated_cells_api_answers_503_and_answers_again_once_reconnected(
        tmp_path: Path) -> None:
    switch = IsolationSwitch(tmp_path / "isolated")
    answered: list[dict[str, Any]] = []

    def answer(event: dict[str, Any]) -> dict[str, Any]:
        answered.append(event)
        return {"statusCode": 201, "body": "{}"}

    guarded = isolating(answer, {ENV: str(switch.path)})
    assert isolating(answer, {}) is answer  # not a cell of a drill: nothing changes
    switch.set("fail")
    refused = guarded({"path": "/jobs"})
    assert refused["statusCode"] == 503
    assert json.loads(refused["body"])["error"]["code"] == "region_isolated"
    assert answered == []
    switch.clear()
    assert guarded({"path": "/jobs"})["statusCode"] == 201
    assert len(answered) == 1


def test_regions_isolate_names_a_missing_drill_and_a_region_it_does_not_run(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["regions", "isolate", "a", "--state-dir", str(tmp_path)]) == 1
    assert "leasehold dev --regions" in capsys.readouterr().err
    Layout(pid=os.getpid(), control_endpoint="http://127.0.0.1:1", control_table="t",
           urls={"a": "http://127.0.0.1:2"},
           switches={"a": str(tmp_path / "a" / "isolated")}).write(tmp_path)
    assert main(["regions", "isolate", "z", "--state-dir", str(tmp_path)]) == 1
    assert "no Region 'z'" in capsys.readouterr().err
    assert main(["regions", "isolate", "a", "--state-dir", str(tmp_path)]) == 0
    assert layout(tmp_path).switch("a").mode() == "fail"
    assert main(["regions", "reconnect", "a", "--state-dir", str(tmp_path)]) == 0
    assert layout(tmp_path).switch("a").mode() is None


def test_a_layout_left_by_a_drill_that_is_gone_is_not_used(tmp_path: Path) -> None:
    Layout(pid=2**22 + 12345, control_endpoint="", control_table="", urls={},
           switches={}).write(tmp_path)
    with pytest.raises(RegionsUnavailable, match="not running"):
        layout(tmp_path)
