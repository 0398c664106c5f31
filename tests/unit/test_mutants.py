"""The mutant set (tests/mutants) stays in step with the code: every mutant still applies to
the tree as it is (so a refactor cannot make one stale in silence), still compiles once
applied (so ``make mutants`` measures the bug, not a syntax error), and names a regression
test that exists."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.mutants.catalogue import MUTANTS, Mutant
from tests.mutants.run import ROOT, Stale, check_applies, mutated


@pytest.mark.parametrize("mutant", MUTANTS, ids=lambda m: m.name)
def test_every_mutant_applies_to_the_current_tree_and_compiles(mutant: Mutant) -> None:
    check_applies(mutant)
    texts: dict[str, str] = {}
    for edit in mutant.edits:
        assert edit.path.startswith("functions/"), edit.path
        assert edit.old != edit.new
        texts[edit.path] = mutated(texts.get(edit.path) or (ROOT / edit.path).read_text(),
                                   edit)
    for path, text in texts.items():
        ast.parse(text, filename=path)  # a SyntaxError fails the test


@pytest.mark.parametrize("mutant", MUTANTS, ids=lambda m: m.name)
def test_every_mutant_names_a_regression_test_that_exists(mutant: Mutant) -> None:
    path, _, name = mutant.regression.partition("::")
    assert path.startswith("tests/") and name, mutant.regression
    source = (ROOT / path).read_text()
    assert f"def {name}(" in source, mutant.regression
    assert mutant.bug and mutant.fixed_in


def test_a_snippet_that_moved_on_is_stale(tmp_path: Path) -> None:
    from tests.mutants.catalogue import Edit
    with pytest.raises(Stale):
        mutated("a = 1\na = 1\n", Edit("functions/x.py", "a = 1\n", "a = 2\n"))
    with pytest.raises(Stale):
        mutated("b = 1\n", Edit("functions/x.py", "a = 1\n", "a = 2\n"))


def test_the_set_has_a_mutant_per_fix_and_unique_names() -> None:
    names = [m.name for m in MUTANTS]
    assert len(names) == len(set(names))
    assert len(MUTANTS) >= 15


#: Tests whose run ``make mutants`` must classify: a real failure is a kill; Hypothesis
#: giving up on the test itself (data generation that differs between runs, a health check)
#: is no verdict on the mutant.
CASES = {
    "killed": """
def test_the_code_under_test_fails():
    assert 1 + 1 == 3
""",
    "flaky": """
from hypothesis import Phase, given, settings, strategies as st

calls = [0]

@settings(database=None, derandomize=True, phases=[Phase.generate])
@given(st.data())
def test_data_generation_differs_between_runs(data):
    calls[0] += 1
    if calls[0] == 1:
        data.draw(st.booleans())
        raise AssertionError("fails once, then draws other data")
    data.draw(st.lists(st.integers(), min_size=3))
    data.draw(st.text(min_size=5))
""",
    "health-check": """
from hypothesis import given, settings, strategies as st

@settings(database=None, derandomize=True)
@given(st.integers().filter(lambda n: str(n).endswith("123456789")))
def test_a_strategy_that_filters_everything(n):
    pass
""",
    "survived": """
def test_passes():
    assert True
""",
    # The test's own check failed, then passed when Hypothesis replayed the example (the
    # machine's examples do not always replay exactly): a kill all the same.
    "killed, not replayed": """
from hypothesis import Phase, given, settings, strategies as st

calls = [0]

@settings(database=None, derandomize=True, phases=[Phase.generate])
@given(st.integers())
def test_fails_once(n):
    calls[0] += 1
    assert calls[0] > 1, "the check caught the bug"
""",
}


@pytest.mark.parametrize("expected", sorted(CASES))
def test_only_a_real_test_failure_counts_as_a_kill(expected: str, tmp_path: Path) -> None:
    from tests.mutants.run import pytest as run_pytest

    test = tmp_path / f"test_{expected.replace('-', '_').replace(', ', '_').replace(' ', '_')}.py"
    test.write_text(CASES[expected])
    result = run_pytest([str(test)], tree=ROOT, scratch=tmp_path, budget=120,
                        log=tmp_path / "run.log")
    outcome, _, detail = expected.partition(", ")
    assert (result.outcome, result.detail) == (outcome, detail), (
        (tmp_path / "run.log").read_text())
