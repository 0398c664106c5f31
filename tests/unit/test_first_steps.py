"""The first steps: what the banner says to run, and one clear line (not a traceback) when
a worker or ``--provision`` has no credentials or no endpoint to reach."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from leasehold.local.hints import cli_command, cli_line, export_line

ROOT = Path(__file__).resolve().parents[2]


def test_the_export_line_is_what_a_shell_runs() -> None:
    assert export_line("http://127.0.0.1:9000") == "export LEASEHOLD_URL=http://127.0.0.1:9000"


def test_the_cli_is_named_by_its_venv_path_when_the_venv_is_not_active(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bin_dir = tmp_path / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    for name in ("python", "leasehold", "activate"):
        (bin_dir / name).write_text("")
        (bin_dir / name).chmod(0o755)
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    python = str(bin_dir / "python")
    assert cli_command(python, str(tmp_path)) == ".venv/bin/leasehold"
    assert "source .venv/bin/activate" in cli_line(python, str(tmp_path))
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")  # activated
    assert cli_command(python, str(tmp_path)) == "leasehold"
    (bin_dir / "leasehold").unlink()  # not installed as a script: the module still works
    assert cli_command(python, str(tmp_path)) == f"{python} -m leasehold.cli"


def run(*argv: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items()
             if not k.startswith("AWS_") and not k.startswith("LEASEHOLD_")}
    clean.update(AWS_CONFIG_FILE="/nonexistent", AWS_SHARED_CREDENTIALS_FILE="/nonexistent",
                 AWS_EC2_METADATA_DISABLED="true", AWS_REGION="us-east-1",
                 PYTHONPATH=os.pathsep.join([str(ROOT / "functions"), str(ROOT)]), **env)
    return subprocess.run([sys.executable, "-m", "leasehold.cli", *argv], env=clean,
                          capture_output=True, text=True, timeout=120, check=False)


@pytest.mark.parametrize("argv, env, line", [
    (["worker"], {}, "leasehold worker: no AWS credentials (set AWS_ACCESS_KEY_ID"),
    (["worker"], {"AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "x",
                  "AWS_ENDPOINT_URL": "http://127.0.0.1:9"},
     "leasehold worker: cannot reach http://127.0.0.1:9 ("),
    (["dev", "--endpoint", "http://127.0.0.1:9", "--provision", "--port", "0", "--in-memory"],
     {"AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "x"},
     "leasehold dev: could not start: cannot reach http://127.0.0.1:9 ("),
])
def test_a_missing_credential_or_endpoint_is_one_line_not_a_traceback(
        argv: list[str], env: dict[str, str], line: str) -> None:
    done = run(*argv, env=env)
    assert done.returncode == 1
    assert "Traceback" not in done.stderr, done.stderr
    errors = [text for text in done.stderr.splitlines() if text.strip()]
    assert len(errors) == 1 and errors[0].startswith(line), done.stderr
