"""``leasehold dev --reload``: an edited task module runs its new code without a restart,
and a task module that no longer imports leaves the workers on the code they have."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from leasehold.client import ApiError, Client

from .conftest import Runtime, start_runtime

pytestmark = pytest.mark.e2e

VERSION = '''from leasehold import task


@task("version")
def version(payload, ctx):
    return {version}
'''


def edit(path: Path, text: str, bump: int) -> None:
    path.write_text(text)
    stamp = time.time() + bump  # a later modification time even on a coarse file system
    os.utime(path, (stamp, stamp))


def said(runtime: Runtime, start: str, after: int, timeout: float = 20) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for line in runtime.output[after:]:
            if line.startswith(start):
                return line
        time.sleep(0.2)
    raise AssertionError(f"no {start!r} line in:\n{''.join(runtime.output[after:])}")


def test_an_edited_task_module_runs_its_new_code_after_a_reload(tmp_path: Path) -> None:
    module = tmp_path / "reloadtasks.py"
    module.write_text(VERSION.format(version=1))
    path = os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])
    runtime = start_runtime("--tasks", "reloadtasks", "--reload", "--workers", "1",
                            env={"PYTHONPATH": path})
    try:
        client = Client(runtime.url)
        assert client.submit("version").result(timeout=30) == 1
        with pytest.raises(ApiError) as unknown:
            client.submit("added")
        assert unknown.value.status == 422

        mark = len(runtime.output)
        edit(module, VERSION.format(version=2) + '\n\n@task("added")\ndef added(payload, ctx):'
                     '\n    return "new"\n', bump=2)
        assert "restarting 1 worker(s)" in said(runtime, "reload:", mark)
        assert client.submit("version").result(timeout=60) == 2
        assert client.submit("added").result(timeout=60) == "new"  # the API knows it too

        mark = len(runtime.output)
        edit(module, "def broken(:\n", bump=4)
        assert "does not import (SyntaxError" in said(runtime, "reload:", mark)
        assert client.submit("version").result(timeout=60) == 2
    finally:
        assert runtime.stop() == 0, "".join(runtime.output[-30:])
