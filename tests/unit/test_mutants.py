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
