"""The reference workers as a user's project gets them (issue 47): ``npm pack`` of
workers/typescript installed into a fresh Node project outside the checkout, run from
TypeScript and from plain Node; and the jar ``make workers`` builds, on the class path of a
user's own one-file Java worker. Each runs a job of a ``leasehold dev`` to SUCCEEDED.

npm installs the tarball (which has no runtime dependencies) with ``--offline``; the
TypeScript compiler and Node's types come from npm's cache, filled by ``make workers``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tarfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from leasehold.conformance import server as servers
from leasehold.conformance.server import POOL, Server

ROOT = Path(__file__).parents[2]
TYPESCRIPT = ROOT / "workers" / "typescript"
JAR = ROOT / "workers" / "java" / "build" / "leasehold-worker.jar"
NPM = ["--no-audit", "--no-fund", "--loglevel=error"]

PLAIN = """
const { Worker } = require("leasehold-worker");
const worker = new Worker({ url: process.env.LEASEHOLD_URL, pool: "POOL", waitSeconds: 1 });
worker.task("conformance.echo", async (payload) => ({ from: "node", echo: payload }));
worker.run().then(() => process.exit(0));
""".replace("POOL", POOL)

TYPED = """
import { JobContext, Worker } from "leasehold-worker";

const worker = new Worker({ url: process.env.LEASEHOLD_URL ?? "", pool: "POOL", waitSeconds: 1 });
worker.task("conformance.echo", async (payload: unknown, ctx: JobContext) => {
  const attempt: number = ctx.attempt;
  return { from: "typescript", echo: payload, attempt };
});
void worker.run().then(() => process.exit(0));
""".replace("POOL", POOL)

JAVA = """
import leasehold.Worker;

public class Echo {
    public static void main(String[] args) throws Exception {
        Worker worker = new Worker(System.getenv("LEASEHOLD_URL"), "POOL", null, 1, 1);
        worker.task("conformance.echo", (payload, ctx) -> payload);
        worker.run(() -> System.out.println("ready"));
    }
}
""".replace("POOL", POOL)


def run(command: list[str], cwd: Path, timeout: float = 300) -> str:
    assert shutil.which(command[0]), f"{command[0]} is missing: `make workers` installs it"
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, check=False,
                          timeout=timeout)
    assert done.returncode == 0, f"{command}: {done.stdout[-2000:]}{done.stderr[-2000:]}"
    return done.stdout


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    started = servers.start()
    yield started
    started.stop()


@pytest.fixture(scope="module")
def tarball(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``npm pack``: its ``prepare`` script builds dist/ (JavaScript and types) first. It
    packs a copy of the package's sources with no dist/ at all (the checkout's dist/ is left
    alone: the conformance tests may be running its worker meanwhile)."""
    assert (TYPESCRIPT / "node_modules" / "typescript").is_dir(), \
        "workers/typescript has no node_modules: run `make workers` (npm ci)"
    source = tmp_path_factory.mktemp("source") / "typescript"
    shutil.copytree(TYPESCRIPT, source, ignore=shutil.ignore_patterns("node_modules", "dist"))
    (source / "node_modules").symlink_to(TYPESCRIPT / "node_modules")
    out = tmp_path_factory.mktemp("pack")
    run(["npm", "pack", "--silent", "--pack-destination", str(out)], source)
    (packed,) = out.glob("leasehold-worker-*.tgz")
    return packed


def job_runs(server: Server, worker: list[str], cwd: Path) -> dict[str, object]:
    """A worker process started by ``worker`` in ``cwd`` runs one echo job; its result."""
    process = subprocess.Popen(worker, cwd=cwd,
                               env={"PATH": os.environ["PATH"], "LEASEHOLD_URL": server.url},
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        job_id = server.submit("conformance.echo", {"n": 7})
        job = server.wait_for([job_id], timeout=60)[job_id]
    finally:
        process.terminate()
        output = process.communicate(timeout=60)[0]
    assert job["state"] == "SUCCEEDED", (job, output)
    result: dict[str, object] = job["result"]
    return result


def test_the_npm_tarball_holds_built_javascript_and_types_and_no_tests(tarball: Path) -> None:
    with tarfile.open(tarball) as archive:
        names = set(archive.getnames())
    assert {"package/dist/index.js", "package/dist/index.d.ts",
            "package/dist/conformance.js", "package/package.json"} <= names
    assert not [name for name in names if "/test/" in name
                or (name.endswith(".ts") and not name.endswith(".d.ts"))]


def test_a_node_project_installs_the_tarball_and_runs_a_job_from_plain_javascript(
        server: Server, tarball: Path, tmp_path: Path) -> None:
    assert not tmp_path.resolve().is_relative_to(ROOT)
    (tmp_path / "package.json").write_text(json.dumps({"name": "app", "private": True}))
    run(["npm", "install", "--offline", *NPM, str(tarball)], tmp_path)
    (tmp_path / "worker.js").write_text(PLAIN)
    assert job_runs(server, ["node", "worker.js"], tmp_path) == {"from": "node",
                                                                   "echo": {"n": 7}}


def test_a_typescript_project_compiles_against_the_packages_types_and_runs_a_job(
        server: Server, tarball: Path, tmp_path: Path) -> None:
    (tmp_path / "package.json").write_text(json.dumps({"name": "app", "private": True}))
    run(["npm", "install", "--prefer-offline", *NPM, str(tarball), "typescript@^5.9.3",
         "@types/node@^20.19.43"], tmp_path)
    (tmp_path / "tsconfig.json").write_text(json.dumps({"compilerOptions": {
        "target": "ES2022", "module": "node16", "moduleResolution": "node16", "strict": True,
        "outDir": "dist", "types": ["node"]}, "include": ["worker.ts"]}))
    (tmp_path / "worker.ts").write_text(TYPED)
    run(["npx", "--no-install", "tsc", "-p", "tsconfig.json"], tmp_path)
    assert job_runs(server, ["node", "dist/worker.js"], tmp_path) == {
        "from": "typescript", "echo": {"n": 7}, "attempt": 1}
    # The types are checked, not just present: a wrong one fails the compile.
    (tmp_path / "worker.ts").write_text(TYPED.replace("const attempt: number",
                                                      "const attempt: string"))
    failed = subprocess.run(["npx", "--no-install", "tsc", "-p", "tsconfig.json"],
                            cwd=tmp_path, capture_output=True, text=True, check=False)
    assert failed.returncode != 0 and "TS2322" in failed.stdout, failed.stdout


def test_the_jar_runs_a_users_own_java_worker_from_its_class_path(
        server: Server, tmp_path: Path) -> None:
    assert JAR.is_file(), "the Java worker's jar is not built: run `make workers`"
    (tmp_path / "Echo.java").write_text(JAVA)
    assert job_runs(server, ["java", "-cp", str(JAR), "Echo.java"], tmp_path) == {"n": 7}
