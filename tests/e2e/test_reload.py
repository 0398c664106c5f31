"""``leasehold dev --reload``: an edited task module runs its new code without a restart,
and a task module that no longer imports leaves the workers on the code they have."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from leasehold.client import ApiError, Client, JobFailed

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


ORDER = '''from leasehold import task


@task("order")
def order(payload, ctx):
    first = {first}
    ctx.sleep(5)
    return [first, ctx.step("ship", lambda: "shipped")]
'''
CHARGE = 'ctx.step("charge", lambda: "charged")'
BILL = 'ctx.step("bill", lambda: "billed")'
PATCHED = f'{BILL} if ctx.patched("rename-charge") else {CHARGE}'


def replay(runtime: Runtime, path: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "leasehold.cli", "replay", "--url", runtime.url,
         "--tasks", "ordertasks", *args], capture_output=True, text=True, timeout=60,
        env={**os.environ, "PYTHONPATH": path})


def test_a_renamed_step_stops_a_sleeping_job_replay_catches_it_and_a_patch_fixes_both(
        tmp_path: Path) -> None:
    module = tmp_path / "ordertasks.py"
    module.write_text(ORDER.format(first=CHARGE))
    path = os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])
    runtime = start_runtime("--tasks", "ordertasks", "--reload", "--workers", "1",
                            env={"PYTHONPATH": path})
    try:
        client = Client(runtime.url)
        old = client.submit("order").job_id
        deadline = time.monotonic() + 20
        while client.get(old)["state"] != "SLEEPING" and time.monotonic() < deadline:
            time.sleep(0.1)
        first_version = client.get(old)["code_version"]
        assert first_version.startswith("dev-")
        # The step is renamed while the job sleeps: the replay check catches it ...
        mark = len(runtime.output)
        edit(module, ORDER.format(first=BILL), bump=2)
        said(runtime, "reload:", mark)
        caught = replay(runtime, path, "--job", old)
        assert caught.returncode == 1, caught.stdout + caught.stderr
        assert f"FAIL {old} order" in caught.stdout and "step 'charge'" in caught.stdout
        # ... and the job, woken on the new code, stops without answering "bill" with
        # "charge"'s result.
        with pytest.raises(JobFailed) as failed:
            client.job(old).result(timeout=30)
        assert failed.value.job["error"]["type"] == "NonDeterministic"
        # The fix: the rename behind ctx.patched. The stopped job is retried by hand and
        # keeps the old branch; a new job takes the new one.
        mark = len(runtime.output)
        edit(module, ORDER.format(first=PATCHED), bump=4)
        said(runtime, "reload:", mark)
        fixed = replay(runtime, path, "--job", old)
        assert fixed.returncode == 0, fixed.stdout + fixed.stderr
        client.retry(old)
        new = client.submit("order")
        assert new.result(timeout=30) == ["billed", "shipped"]
        assert client.job(old).result(timeout=30) == ["charged", "shipped"]
        done = client.get(old)
        assert done["code_version"] == first_version  # the version that first ran it
        attempts = [h["code_version"] for h in done["history"] if h["reason"] == "lease"]
        assert attempts[0] == first_version and attempts[-1] != first_version
    finally:
        assert runtime.stop() == 0, "".join(runtime.output[-30:])
