"""Shared fixtures: moto-backed AWS, a fake clock, and factories for a Leasehold app.

Where the tests' AWS is (docs/contributing.md, "Two commands"):

* by default every service is moto, in-process; a test (or module) marked ``ddblocal`` runs
  twice, the second time with DynamoDB on AWS's own DynamoDB Local
  (``tests/ddblocal.py``) and SQS and EventBridge still on moto;
* ``LEASEHOLD_TEST_ENDPOINT=URL`` sends every service to URL (another emulator), instead;
* ``LEASEHOLD_TEST_ENDPOINT=dynamodb=URL`` sends only DynamoDB there (the rest stays moto);
* ``LEASEHOLD_TEST_ENDPOINT=aws`` uses real AWS with the ambient credentials and region (a
  sandbox account: the tests create and leave uniquely named tables and queues).
"""

from __future__ import annotations

import ast
import os
import random
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import botocore.loaders
import botocore.session
import pytest
from moto import mock_aws

from leasehold.aws.clients import Clients
from leasehold.aws.provision import create_all
from leasehold.clock import FakeClock
from leasehold.compose import compose
from leasehold.core.registry import TaskRegistry
from leasehold.lifecycle.app import Leasehold
from leasehold.settings import Settings
from tests import ddblocal

#: The suite's endpoint when it is not moto (see the module's docstring).
TEST_ENDPOINT = os.environ.get("LEASEHOLD_TEST_ENDPOINT", "").strip()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "ddblocal: also run each test with DynamoDB on AWS's DynamoDB Local")
    share_botocore_models()
    answer_dynamodb_directly()


def answer_dynamodb_directly() -> None:
    """The in-process moto answers DynamoDB's item operations (and change-stream pages) the
    way ``leasehold dev``'s emulator does (:mod:`leasehold.local.dynamo_responses`): as the
    JSON moto has already computed, not through its generic model-driven serializer, which
    walks every attribute value of every item through a chain of alias look-ups. That walk
    was more than half the CPU of the state machine (test_stateful.py, cProfile) and a large
    share of every test on moto. Nothing a client reads changes:
    ``tests/unit/test_dynamo_responses.py`` checks the two answers are the same JSON for
    every operation answered this way."""
    from leasehold.local import dynamo_responses

    dynamo_responses.install()
    dynamo_responses.install_streams()


class _SearchPaths(list[str]):
    """A shared loader's search path: boto3 appends its own data folder on every Session."""

    def append(self, path: str) -> None:
        if path not in self:
            super().append(path)


_LOADERS: dict[str | None, botocore.loaders.Loader] = {}


def share_botocore_models() -> None:
    """One botocore data loader per data path for the whole test process.

    Every :class:`leasehold.aws.clients.Clients` builds its clients from a new boto3 Session,
    and each Session's own loader reads and parses the services' JSON models again (DynamoDB's,
    SQS's, the endpoint rules, the partitions): about 0.1 s of CPU a client, a few clients an
    app, an app or more a test, over a thousand tests. The models are static files, and one
    loader already hands the same parsed model to every client of its Session, so sharing it
    across Sessions changes nothing but the parsing. Only this process: the runtimes the
    tests start as subprocesses build their clients once anyway.
    """
    if botocore.session.create_loader is not botocore.loaders.create_loader:
        return  # shared already

    def shared(search_path_string: str | None = None) -> botocore.loaders.Loader:
        """botocore.loaders.create_loader's loader, made once per data path."""
        loader = _LOADERS.get(search_path_string)
        if loader is None:
            extra = [] if search_path_string is None else [
                os.path.expanduser(os.path.expandvars(path))
                for path in search_path_string.split(os.pathsep)]
            loader = botocore.loaders.Loader(extra_search_paths=_SearchPaths(extra))
            _LOADERS[search_path_string] = loader
        return loader

    botocore.session.create_loader = shared


#: The longest modules, handed to the workers first: `make test` runs its workers over
#: modules (test classes, where a module has them) in collection order (``--dist loadscope
#: --no-loadscope-reorder``: pytest-xdist's default order is most tests first, which put the
#: state machine, a single test, last), and a long module collected late is the whole suite's
#: tail (the state machine runs for minutes, on one worker, while the others have nothing
#: left to do). The order is the measured one, longest single scope first (the summary below
#: prints the modules' times at the end of every run).
LONGEST_FIRST = ("tests/integration/test_stateful.py", "tests/e2e/test_init_venv.py",
                 "tests/e2e/test_schema.py", "tests/infra/test_control_table.py",
                 "tests/e2e/test_bench.py",
                 "tests/e2e/test_documented_commands.py", "tests/infra/test_adoption.py",
                 "tests/e2e/test_time.py", "tests/e2e/test_runtime.py",
                 "tests/conformance/test_conformance.py",
                 "tests/integration/test_tracing_faults.py",
                 "tests/integration/test_failure_model.py",
                 "tests/integration/test_cells_drill.py", "tests/e2e/test_dev_state_dir.py",
                 "tests/integration/test_combinations_flow.py", "tests/e2e/test_walkthrough.py")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {path: i for i, path in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::")[0], len(LONGEST_FIRST)))


#: The repository: node ids' paths are relative to it.
REPOSITORY = Path(__file__).resolve().parents[1]


def modules_requesting(fixture: str, folder: Path, *, root: Path = REPOSITORY
                       ) -> frozenset[str]:
    """The test modules of ``folder`` (node ids' paths, from ``root``) with a function that
    takes ``fixture``: read from their source, as the xdist controller collects nothing."""
    found: set[str] = set()
    for path in sorted(folder.glob("test_*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and fixture in {
                    arg.arg for arg in (*node.args.args, *node.args.kwonlyargs)}:
                found.add(path.relative_to(root).as_posix())
                break
    return frozenset(found)


#: Modules that share a session fixture too costly to make in every test process: the cloud
#: assembly of tests/infra/conftest.py (``synthesized``: a whole CDK synthesis, tens of
#: seconds of CPU between Python and the jsii Node.js process). ``--dist loadscope`` spread
#: them over all the workers, and each worker synthesized the same app again; `make test`
#: hands them to one worker as one unit (:func:`pytest_xdist_make_scheduler`).
SHARED_SESSION_GROUPS = {
    "tests/infra (one synthesis)": modules_requesting(
        "synthesized", REPOSITORY / "tests" / "infra"),
}


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``--dist loadscope`` with :data:`SHARED_SESSION_GROUPS` as single work units (a
    module or class is one otherwise, as ever)."""
    if config.getoption("dist") != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling

    group_of = {module: group for group, modules in SHARED_SESSION_GROUPS.items()
                for module in modules}

    class GroupedScopes(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            group = group_of.get(nodeid.split("::")[0])
            return group if group is not None else super()._split_scope(nodeid)

    return GroupedScopes(config, log)


#: How many modules the end-of-run summary names (``make test`` prints them, slowest first).
SLOWEST_MODULES = 10


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """The slowest modules by the time their tests took (setup, call and teardown summed, so
    a module's shared fixtures count): where the suite's minutes go, module by module. Under
    xdist the controller sees every worker's reports, so the sum is the whole run's."""
    per_module: dict[str, float] = {}
    for reports in terminalreporter.stats.values():
        for report in reports:
            if isinstance(report, pytest.TestReport):
                module = report.nodeid.split("::")[0]
                per_module[module] = per_module.get(module, 0.0) + report.duration
    if not per_module:
        return
    slowest = sorted(per_module.items(), key=lambda item: item[1], reverse=True)
    terminalreporter.write_sep("=", f"slowest {min(SLOWEST_MODULES, len(slowest))} modules")
    for module, seconds in slowest[:SLOWEST_MODULES]:
        terminalreporter.write_line(f"{seconds:8.1f}s {module}")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    # A module marked ddblocal runs on both; an explicit test endpoint replaces both.
    if "backend" in metafunc.fixturenames and not TEST_ENDPOINT and \
            metafunc.definition.get_closest_marker("ddblocal") is not None:
        metafunc.parametrize("backend", ["moto", "ddblocal"], indirect=True)


@pytest.fixture(autouse=True)
def _aws_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LEASEHOLD_TASKS", raising=False)
    for name in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_DYNAMODB"):
        monkeypatch.delenv(name, raising=False)
    if TEST_ENDPOINT == "aws":
        return  # a real account: its own credentials and region
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_REGION", "us-east-1")


@pytest.fixture
def backend(request: pytest.FixtureRequest) -> str:
    """Where this test's DynamoDB is: ``moto``, ``ddblocal``, or ``endpoint`` (the test
    endpoint's)."""
    return "endpoint" if TEST_ENDPOINT else getattr(request, "param", "moto")


@pytest.fixture(scope="session")
def dynamodb_local() -> str:
    """The endpoint of this process's DynamoDB Local (started once, on first use)."""
    return ddblocal.shared().endpoint


@pytest.fixture
def aws(backend: str, request: pytest.FixtureRequest,
        monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """AWS for the test: moto in-process, with DynamoDB elsewhere when ``backend`` says so.

    Clients built with no explicit endpoint (``Settings.endpoint_url`` None, as here) take
    botocore's service-specific ``AWS_ENDPOINT_URL_DYNAMODB``; moto's mock lets through a
    request to a URL that is not AWS's, so only DynamoDB leaves the process.
    """
    if backend == "ddblocal":
        monkeypatch.setenv("AWS_ENDPOINT_URL_DYNAMODB", request.getfixturevalue("dynamodb_local"))
    elif TEST_ENDPOINT.startswith("dynamodb="):
        monkeypatch.setenv("AWS_ENDPOINT_URL_DYNAMODB", TEST_ENDPOINT.partition("=")[2])
    elif TEST_ENDPOINT:
        if TEST_ENDPOINT != "aws":
            monkeypatch.setenv("AWS_ENDPOINT_URL", TEST_ENDPOINT)
        yield  # every service is the endpoint's
        return
    with mock_aws():
        yield


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def registry() -> TaskRegistry:
    return TaskRegistry()


MakeApp = Callable[..., Leasehold]


@pytest.fixture
def make_app(aws: None, clock: FakeClock, registry: TaskRegistry) -> MakeApp:
    """Builds an app over fresh, uniquely named tables and queues (see :func:`aws`)."""

    def make(**overrides: object) -> Leasehold:
        prefix = "t" + uuid.uuid4().hex[:8]
        values: dict[str, object] = {
            "jobs_table": f"{prefix}-jobs", "schedules_table": f"{prefix}-schedules",
            "tenants_table": f"{prefix}-tenants", "coordination_table": f"{prefix}-coord",
            "workflows_table": f"{prefix}-workflows",
            "queue_prefix": prefix, "shards": 4, "lease_seconds": 30.0,
            "pools": ("default",),
        }
        values.update(overrides)
        settings = Settings(**values)  # type: ignore[arg-type]
        clients = Clients(settings)
        create_all(clients, settings)
        return compose(settings, clock=clock, registry=registry,
                                       clients=clients, rng=random.Random(7))

    return make


@pytest.fixture
def app(make_app: MakeApp) -> Leasehold:
    return make_app()
