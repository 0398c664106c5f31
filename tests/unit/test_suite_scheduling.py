"""How `make test` hands the suite to its workers (tests/conftest.py): the infra modules that
read the one session synthesis run as one unit, so the app is synthesized once, not once per
worker."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import SHARED_SESSION_GROUPS, modules_requesting

ROOT = Path(__file__).parents[2]


def test_the_modules_that_read_the_session_synthesis_are_one_group() -> None:
    (group,) = SHARED_SESSION_GROUPS.values()
    # Read from source: a module whose test takes `synthesized` is in; one that synthesizes
    # its own apps (several Regions) is not, and runs beside the others as before.
    assert {"tests/infra/test_construct.py", "tests/infra/test_validators.py",
            "tests/infra/test_production.py"} <= group
    assert "tests/infra/test_control_table.py" not in group
    # The fixture it is named after is the session one of tests/infra/conftest.py: renamed,
    # the group would go empty and every worker would synthesize again.
    conftest = (ROOT / "tests" / "infra" / "conftest.py").read_text()
    assert '@pytest.fixture(scope="session")\ndef synthesized(' in conftest


def test_a_fixture_taken_by_a_fixture_of_the_module_counts(tmp_path: Path) -> None:
    folder = tmp_path / "tests" / "infra"
    folder.mkdir(parents=True)
    (folder / "test_a.py").write_text(
        "import pytest\n\n@pytest.fixture\ndef stack(*, synthesized):\n    return 1\n")
    (folder / "test_b.py").write_text("def test_b(tmp_path):\n    synthesized = 1\n")
    (folder / "helpers.py").write_text("def f(synthesized):\n    pass\n")
    found = modules_requesting("synthesized", folder, root=tmp_path)
    assert found == frozenset({"tests/infra/test_a.py"})
