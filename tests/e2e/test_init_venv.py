"""Leasehold as a user adopts it (issue 47): the sdist and wheel ``python -m build`` makes,
installed with pip into a fresh virtualenv outside the checkout, with nothing of the clone:
no path to it, no ``PYTHONPATH``, no borrowing of its ``.venv``.

``leasehold init`` (run from that virtualenv) writes a project whose ``requirements-dev.txt``
names Leasehold by version; the project installs it into its own ``.venv`` exactly as its
README says for a folder of wheels, ``pip install --find-links DIR -r requirements-dev.txt``,
then runs its tests, ``leasehold dev`` and a job through it, and synthesizes its CDK app.

pip reads only local wheels (``--no-index``; tests/packaging.py builds them).
"""

from __future__ import annotations

import http.server
import json
import os
import re
import signal
import subprocess
import sys
import tarfile
import threading
import time
import urllib.request
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest

import leasehold
from leasehold.client import Client
from tests.packaging import Built, build, offline

from .conftest import ROOT, Runtime

#: The fixtures build the wheels (first run only) and install a whole virtualenv with pip
#: (tens of wheels, aws-cdk-lib's among them), which on a loaded machine outlasts pytest's
#: default 300 s although each pip is given 900 s below: the first test's limit is the sum
#: of its pips' and its own, so a slow install is never cut short and reported as a hang.
pytestmark = [pytest.mark.e2e, pytest.mark.timeout(3 * 900 + 300)]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    return build(tmp_path_factory.mktemp("dist"))


def in_venv(venv: Path) -> dict[str, str]:
    """The environment of a shell after ``. .venv/bin/activate``: nothing of this checkout."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME", "PIP_FIND_LINKS")}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["VIRTUAL_ENV"] = str(venv)
    return env


def pip_install(venv: Path, *args: str, cwd: Path, links: str) -> None:
    installed = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", *args], cwd=cwd,
        capture_output=True, text=True, check=False, env={**in_venv(venv), **offline(links)},
        timeout=900)
    assert installed.returncode == 0, installed.stderr[-3000:]


@pytest.fixture(scope="module")
def user(tmp_path_factory: pytest.TempPathFactory, built: Built) -> Path:
    """A user's machine: a virtualenv outside the checkout with only Leasehold's wheel (and
    its ``local`` extra) installed from a folder of wheels."""
    home = tmp_path_factory.mktemp("user")
    assert not home.resolve().is_relative_to(ROOT)
    venv = home / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip_install(venv, "leasehold[local]", cwd=home, links=built.find_links)
    return home


@pytest.fixture(scope="module")
def project(user: Path, built: Built) -> Iterator[Path]:
    """One project and its virtualenv for the module (installing it takes most of the time);
    the test that takes moto out of it runs last. ``leasehold init`` is the user's, from the
    wheel; the project's folder of wheels sits beside it, named relatively as its README
    shows (``--find-links ../wheels``)."""
    wheels = user / "wheels"
    wheels.mkdir()
    (wheels / built.wheel.name).write_bytes(built.wheel.read_bytes())
    created = subprocess.run(["leasehold", "init", "myapp", "--package", "myapp"], cwd=user,
                             capture_output=True, text=True, check=False,
                             env=in_venv(user / "venv"))
    assert created.returncode == 0, created.stderr
    folder = user / "myapp"
    venv = folder / ".venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, cwd=folder)
    others = built.find_links.split(" ", 1)[1]  # the cached dependencies only
    pip_install(venv, "--find-links", "../wheels", "-r", "requirements-dev.txt", cwd=folder,
                links=others)
    yield folder


def test_the_sdist_and_wheel_hold_what_a_user_needs(built: Built) -> None:
    with zipfile.ZipFile(built.wheel) as archive:
        wheel = set(archive.namelist())
    data = f"leasehold-{leasehold.__version__}.data/data/share/leasehold"
    needed = {"leasehold/console/static/index.html", "leasehold/console/static/app.js",
              "leasehold/console/static/style.css", "leasehold/cdk/construct.py",
              "leasehold/cdk/code.py", "leasehold/conformance/cases.py",
              "leasehold/conformance/python_worker.py", "leasehold/py.typed",
              f"{data}/openapi.json", f"{data}/protocol.md", f"{data}/CHANGELOG.md"}
    assert needed <= wheel, needed - wheel
    with zipfile.ZipFile(built.wheel) as archive:
        assert archive.read(f"{data}/openapi.json") == (ROOT / "docs" / "openapi.json"
                                                        ).read_bytes()
        metadata = archive.read(f"leasehold-{leasehold.__version__}.dist-info/METADATA").decode()
    for extra in ("cdk", "otel", "dev", "local", "infra"):
        assert f"Provides-Extra: {extra}" in metadata
    assert f"Version: {leasehold.__version__}" in metadata
    prefix = f"leasehold-{leasehold.__version__}/"
    with tarfile.open(built.sdist) as archive:
        sdist = {name.removeprefix(prefix) for name in archive.getnames()}
    assert {"pyproject.toml", "CHANGELOG.md", "docs/openapi.json", "docs/protocol.md",
            "functions/leasehold/console/static/index.html"} <= sdist


HELLO = """
from leasehold import task


@task("hello")
def hello(payload, ctx):
    return f"hello, {payload['name']}"
"""


def test_an_installed_wheel_reports_its_version_and_runs_a_job(user: Path) -> None:
    venv = user / "venv"
    where = subprocess.run([str(venv / "bin" / "python"), "-c",
                            "import leasehold; print(leasehold.__file__)"],
                           capture_output=True, text=True, check=True, env=in_venv(venv))
    assert Path(where.stdout.strip()).is_relative_to(venv)
    said = subprocess.run(["leasehold", "--version"], capture_output=True, text=True,
                          check=True, env=in_venv(venv))
    assert said.stdout.strip() == f"leasehold {leasehold.__version__}"
    (user / "hello.py").write_text(HELLO)
    runtime = start_dev(user, venv=venv, tasks="hello")
    try:
        with urllib.request.urlopen(runtime.url + "/healthz", timeout=30) as health:
            assert json.load(health)["version"] == leasehold.__version__
        with urllib.request.urlopen(runtime.url + "/", timeout=30) as page:  # the console
            assert page.status == 200 and b"<html" in page.read().lower()
        job = Client(url=runtime.url).submit("hello", {"name": "wheel"})
        assert job.result(timeout=60) == "hello, wheel"
    finally:
        assert runtime.stop() == 0, "".join(runtime.output[-30:])


def test_the_installed_conformance_kit_runs_against_a_worker_outside_the_checkout(
        user: Path) -> None:
    """``leasehold conformance`` from the wheel (issue 45): its runtime, its cases and the
    Python reference worker all come from the user's virtualenv; three cases keep it quick
    (tests/conformance runs every case on every worker)."""
    venv = user / "venv"
    listed = subprocess.run(["leasehold", "conformance", "--list"], capture_output=True,
                            text=True, check=True, env=in_venv(venv), cwd=user)
    cases = [line.split()[0] for line in listed.stdout.splitlines() if line.strip()]
    kept = ["lease-and-finish", "zombie", "trace-context"]
    assert set(kept) <= set(cases), cases
    worker = f"{venv / 'bin' / 'python'} -m leasehold.conformance.python_worker"
    ran = subprocess.run(["leasehold", "conformance", "--worker", worker, "--language", "python",
                          "--exclude", ",".join(c for c in cases if c not in kept)],
                         capture_output=True, text=True, check=False, env=in_venv(venv),
                         cwd=user, timeout=600)
    assert ran.returncode == 0, (ran.stdout[-3000:], ran.stderr[-3000:])
    for case in kept:
        assert re.search(rf"^pass\s+{re.escape(case)} ", ran.stdout, re.M), (case, ran.stdout)
    assert "3 passed, 0 failed" in ran.stdout, ran.stdout


def start_dev(project: Path, env: dict[str, str] | None = None, *, venv: Path | None = None,
              tasks: str = "myapp.tasks") -> Runtime:
    process = subprocess.Popen(
        ["leasehold", "dev", "--tasks", tasks, "--port", "0", "--workers", "1"],
        cwd=project, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env={**in_venv(venv or project / ".venv"), **(env or {})})
    runtime = Runtime(process)
    assert process.stdout is not None
    deadline = time.monotonic() + 60
    for line in process.stdout:
        runtime.output.append(line)
        if line.strip().startswith("API:"):
            runtime.url = line.split()[1]
        if line.startswith("Press Ctrl-C") or time.monotonic() > deadline:
            break
    if not runtime.url:
        process.send_signal(signal.SIGINT)
        process.kill()
        raise AssertionError("leasehold dev did not start:\n" + "".join(runtime.output))
    return runtime


def test_a_new_project_runs_its_tests_its_runtime_and_its_synth_from_its_own_virtualenv(
        project: Path, tmp_path: Path) -> None:
    venv = project / ".venv"
    assert "leasehold[cdk,local]==" in (project / "requirements-dev.txt").read_text()
    where = subprocess.run([str(venv / "bin" / "python"), "-c",
                            "import leasehold, moto; print(leasehold.__file__)"],
                           capture_output=True, text=True, check=False, env=in_venv(venv))
    assert where.returncode == 0, where.stderr
    assert Path(where.stdout.strip()).is_relative_to(venv)

    tested = subprocess.run(["pytest", "-q", "-p", "no:cacheprovider"], cwd=project,
                            capture_output=True, text=True, check=False,
                            env=in_venv(venv), timeout=300)
    assert tested.returncode == 0, tested.stdout[-3000:]
    assert "3 passed" in tested.stdout

    runtime = start_dev(project)
    try:
        job = Client(url=runtime.url).submit("myapp.describe",
                                             {"name": "report.pdf", "bytes": 1_500_000})
        assert job.result(timeout=60) == {"name": "report.pdf", "size": "1.5 MB"}
    finally:
        assert runtime.stop() == 0, "".join(runtime.output[-30:])

    # `cdk synth` runs `python3 app.py` (cdk.json) with CDK_OUTDIR set and cdk.json's context
    # (the recommended feature flags init writes) in CDK_CONTEXT_JSON: here, the project's
    # python, which bundles Leasehold for Lambda from its installed package and metadata
    # (real pip, arm64 wheels from PyPI) with the project's tasks and their requirement.
    outdir = tmp_path / "cdk.out"
    context = json.loads((project / "cdk.json").read_text())["context"]
    synth = subprocess.run(["python", "app.py"], cwd=project, capture_output=True, text=True,
                           check=False, timeout=900, env={
                               **in_venv(venv), "CDK_OUTDIR": str(outdir),
                               "CDK_CONTEXT_JSON": json.dumps(context),
                               "JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION": "1"})
    assert synth.returncode == 0, synth.stderr[-4000:]
    manifest = json.loads((outdir / "Myapp.assets.json").read_text())
    (code,) = [outdir / asset["source"]["path"] for asset in manifest["files"].values()
               if asset["source"].get("packaging") == "zip"]
    assert (code / "myapp" / "tasks.py").read_text() == \
        (project / "myapp" / "tasks.py").read_text()
    assert (code / "humanize" / "__init__.py").is_file()
    assert (code / "leasehold" / "handlers" / "worker.py").is_file()
    assert list((code / "pydantic_core").glob("*aarch64*.so")), "not built for arm64"
    assert not (code / "leasehold" / "cdk").exists()


class _Recorder(http.server.BaseHTTPRequestHandler):
    """A partner's API on loopback: answers 200 and keeps each request's headers."""

    seen: list[dict[str, str]]

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        type(self).seen.append(dict(self.headers))
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


def serve() -> tuple[http.server.ThreadingHTTPServer, list[dict[str, str]]]:
    handler = type("Partner", (_Recorder,), {"seen": []})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, handler.seen


def test_a_secret_bound_to_one_origin_is_sent_there_and_refused_elsewhere(
        project: Path) -> None:
    """Issue 43, as a user would: a deployment secret names the one origin it may go to;
    a target there gets the header, a target at any other host is a 422 naming the secret
    (never its value), from the user's own virtualenv."""
    partner, seen = serve()
    attacker, stolen = serve()
    origin = f"http://127.0.0.1:{partner.server_address[1]}"
    runtime = start_dev(project, {"LEASEHOLD_TARGETS": json.dumps({"http_secrets": {
        "partner-api-key": {"secret": "secretsmanager:partner-api-key", "origins": [origin]}}})})
    try:
        endpoint = next(line.split()[1] for line in runtime.output
                        if line.strip().startswith("AWS:"))
        boto3.client("secretsmanager", endpoint_url=endpoint, region_name="us-east-1",
                     aws_access_key_id="leasehold-local", aws_secret_access_key="leasehold-local"
                     ).create_secret(Name="partner-api-key", SecretString="s3cr3t-value")
        auth = {"secret_header": {"name": "X-Token", "secret": "partner-api-key"}}
        sent = runtime.call("POST", "/jobs", {"target": {"http": {
            "url": f"{origin}/hook", "method": "POST", "body": {"n": 1}, "auth": auth}}})
        assert sent.status == 201, sent.body
        done = runtime.wait_for([sent.body["job_id"]])
        assert done[sent.body["job_id"]]["state"] == "SUCCEEDED", done
        assert [h.get("X-Token") for h in seen] == ["s3cr3t-value"]
        refused = runtime.call("POST", "/jobs", {"target": {"http": {
            "url": f"http://127.0.0.1:{attacker.server_address[1]}/collect", "method": "POST",
            "auth": auth}}})
        assert refused.status == 422, refused.body
        said = json.dumps(refused.body)
        assert "partner-api-key" in said and "s3cr3t-value" not in said
        assert stolen == []
    finally:
        partner.shutdown()
        attacker.shutdown()
        assert runtime.stop() == 0, "".join(runtime.output[-30:])


def test_without_the_emulator_leasehold_dev_says_what_is_missing(project: Path) -> None:
    venv = project / ".venv"
    subprocess.run(["pip", "uninstall", "--quiet", "--yes", "moto"], check=True,
                   env=in_venv(venv), capture_output=True)
    said = subprocess.run(["leasehold", "dev", "--tasks", "myapp.tasks", "--port", "0"],
                          cwd=project, capture_output=True, text=True, check=False,
                          env=in_venv(venv), timeout=60)
    assert said.returncode != 0
    assert "the embedded AWS emulator needs moto" in said.stdout + said.stderr
    assert "leasehold[local]" in said.stdout + said.stderr
