"""The state directory's lock, numbered ``--fresh`` backups and the unclean-stop notice
(issue 18, items 7 and 8); the e2e tests run the same through real ``leasehold dev``."""

from __future__ import annotations

import io
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from leasehold.local.keeper import StateInUse, StateKeeper
from leasehold.local.state import move_aside


def keeper(directory: Path) -> StateKeeper:
    return StateKeeper(directory, every=1.0, out=io.StringIO())


def test_a_held_state_dir_refuses_a_second_keeper_naming_the_holder(tmp_path: Path) -> None:
    first, second = keeper(tmp_path), keeper(tmp_path)
    first.lock()
    with pytest.raises(StateInUse) as refused:
        second.lock()
    assert f"pid {os.getpid()}" in str(refused.value)
    assert str(tmp_path) in str(refused.value) and "--state-dir" in str(refused.value)
    first.release()  # as the kernel does when the holder dies
    second.lock()
    second.release()


def test_moving_aside_never_overwrites_an_earlier_backup(tmp_path: Path) -> None:
    saved = tmp_path / "state.json"
    assert move_aside(saved) is None  # nothing to move
    for content in ("first", "second", "third"):
        saved.write_text(content)
        move_aside(saved)
    assert not saved.exists()
    assert [(tmp_path / f"state.json.old.{n}").read_text() for n in (1, 2, 3)] == \
        ["first", "second", "third"]


def test_the_unclean_notice_says_when_the_last_save_was_and_what_it_means(
        tmp_path: Path) -> None:
    saved_at = datetime.now(UTC) - timedelta(seconds=42)
    notice = keeper(tmp_path).unclean_notice(saved_at)
    assert "did not stop cleanly" in notice and str(tmp_path) in notice
    assert f"{saved_at:%Y-%m-%d %H:%M:%S} UTC (42s ago)" in notice
    assert "accepted after that is lost" in notice and "may run again" in notice
