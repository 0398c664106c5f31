"""``make mutants``: how strong the suite is, measured on bugs it once let through.

For each mutant of :mod:`tests.mutants.catalogue`, a scratch copy of the tree (its tracked and
new files, as they are now: edits made while it runs do not reach it) gets the mutant's edits,
and in it (its ``functions/`` first on ``PYTHONPATH``, ahead of the editable install) run:

1. the state machine (``tests/integration/test_stateful.py::TestLifecycle``) at a fixed
   Hypothesis seed and a bounded budget (examples x steps, and a wall-clock limit);
2. the mutant's own regression test.

It prints a table (killed by the machine and when, killed by the regression test, survived)
and exits non-zero if any mutant survives both, if one no longer applies, or if the
unmutated tree fails first (every mutant applies, and the machine and every regression test
pass on the code as it is: otherwise a "kill" would prove nothing).

``python -m tests.mutants.run --help`` lists the options (``--only``, the budget, and
``--machine-only`` / ``--regression-only`` / ``--no-baseline`` for a quicker look).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from tests.mutants.catalogue import MUTANTS, Edit, Mutant
from tests.mutants.verdicts import VERDICTS

ROOT = Path(__file__).resolve().parents[2]
MACHINE = "tests/integration/test_stateful.py::TestLifecycle"


class Stale(Exception):
    """A mutant's snippet is not in its file exactly once: the code moved on."""


def mutated(source: str, edit: Edit) -> str:
    """``source`` with ``edit`` applied; :class:`Stale` unless ``edit.old`` occurs once."""
    count = source.count(edit.old)
    if count != 1:
        raise Stale(f"{edit.path}: the snippet occurs {count} times, not once:\n{edit.old}")
    return source.replace(edit.old, edit.new)


def apply(mutant: Mutant, root: Path) -> None:
    """Apply ``mutant``'s edits to the tree at ``root`` (a copy: never the work tree)."""
    for edit in mutant.edits:
        path = root / edit.path
        path.write_text(mutated(path.read_text(), edit))


def check_applies(mutant: Mutant, root: Path = ROOT) -> None:
    """Raise :class:`Stale` unless every edit of ``mutant`` applies to ``root``'s tree, in
    order (later edits of one file see the earlier ones)."""
    texts: dict[str, str] = {}
    for edit in mutant.edits:
        text = texts.get(edit.path)
        if text is None:
            text = (root / edit.path).read_text()
        texts[edit.path] = mutated(text, edit)


@dataclass
class Result:
    #: "killed" (a test failed), "survived", "timeout", "flaky" or "health-check" (Hypothesis
    #: gave up on the test itself: no verdict on the mutant), "error", "skipped".
    outcome: str
    seconds: float = 0.0
    #: Said beside the outcome: "not replayed" for a kill whose example Hypothesis did not
    #: see fail again when it replayed it.
    detail: str = ""

    def shown(self) -> str:
        if self.outcome == "skipped":
            return "-"
        return f"{self.outcome} ({self.seconds:.0f} s{', ' + self.detail if self.detail else ''})"


def tree_files(root: Path = ROOT) -> list[str]:
    """The tree's files as git sees them: tracked, and new ones not ignored."""
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=root,
                            check=True, capture_output=True).stdout.decode()
    return [name for name in listed.split("\0") if name and (root / name).is_file()]


def copy_tree(files: Sequence[str], to: Path, root: Path = ROOT) -> None:
    for name in files:
        (to / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / name, to / name)


def pytest(args: Sequence[str], *, tree: Path, scratch: Path, budget: float,
           env: dict[str, str] | None = None, log: Path) -> Result:
    """Run pytest on ``args`` in ``tree`` (its ``functions`` first on the path); killed (its
    whole process group) past ``budget`` seconds."""
    verdicts = scratch / f"verdicts-{log.stem}.jsonl"
    verdicts.unlink(missing_ok=True)
    environ = {**os.environ, **(env or {}),
               "PYTHONPATH": os.pathsep.join(filter(None, [
                   str(tree / "functions"), os.environ.get("PYTHONPATH", "")])),
               # The Hypothesis database of this run alone: an example another mutant
               # failed on is not replayed here.
               "HYPOTHESIS_STORAGE_DIRECTORY": str(scratch / ".hypothesis"),
               VERDICTS: str(verdicts)}
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider",
               "-p", "tests.mutants.verdicts", "-q", "-x",
               "-o", f"timeout={int(budget) + 60}", *args]
    start = time.monotonic()
    with log.open("w") as out:
        process = subprocess.Popen(command, cwd=tree, env=environ, stdout=out,
                                   stderr=subprocess.STDOUT, start_new_session=True)
        try:
            code = process.wait(timeout=budget)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            return Result("timeout", time.monotonic() - start)
    seconds = time.monotonic() - start
    # 0: passed; 1: a test did not pass (why: the verdicts plugin); anything else
    # (collection, usage): not a verdict.
    if code != 1:
        return Result({0: "survived"}.get(code, "error"), seconds)
    return replace(failure(verdicts), seconds=seconds)


def failure(verdicts: Path) -> Result:
    """What a run whose pytest exited 1 counts as, from the lines the verdicts plugin
    wrote: "killed" only if a test's own code failed (said "not replayed" when Hypothesis
    did not see its example fail again); else what stopped it ("flaky", "health-check"),
    or "error" (nothing recorded: pytest stopped some other way)."""
    kinds = [json.loads(line)["kind"] for line in
             (verdicts.read_text().splitlines() if verdicts.exists() else ())]
    if "failed" in kinds:
        return Result("killed")
    if "unreplayed" in kinds:
        return Result("killed", detail="not replayed")
    return Result(kinds[0] if kinds else "error")


@dataclass(frozen=True)
class Budget:
    examples: int
    steps: int
    seed: int
    seconds: float
    regression_seconds: float


def machine(tree: Path, scratch: Path, budget: Budget, log: Path) -> Result:
    return pytest([MACHINE, f"--hypothesis-seed={budget.seed}"], tree=tree,
                  scratch=scratch, budget=budget.seconds, log=log, env={
                      "LEASEHOLD_MACHINE_SHRINK": "0",
                      "LEASEHOLD_SOAK_EXAMPLES": str(budget.examples),
                      "LEASEHOLD_SOAK_STEPS": str(budget.steps)})


def run_mutant(mutant: Mutant, files: Sequence[str], snapshot: Path, budget: Budget,
               logs: Path, *, with_machine: bool, with_regression: bool
               ) -> tuple[Result, Result]:
    with tempfile.TemporaryDirectory(prefix=f"mutant-{mutant.name}-") as tmp:
        scratch = Path(tmp)
        tree = scratch / "tree"
        copy_tree(files, tree, snapshot)
        apply(mutant, tree)
        by_machine = machine(tree, scratch, budget, logs / f"{mutant.name}.machine.log") \
            if with_machine else Result("skipped")
        by_test = pytest([mutant.regression], tree=tree, scratch=scratch,
                         budget=budget.regression_seconds,
                         log=logs / f"{mutant.name}.regression.log") \
            if with_regression else Result("skipped")
    return by_machine, by_test


def verdict(by_machine: Result, by_test: Result) -> str:
    if "error" in (by_machine.outcome, by_test.outcome):
        return "ERROR"
    if "killed" in (by_machine.outcome, by_test.outcome):
        return "killed"
    if {"flaky", "health-check"} & {by_machine.outcome, by_test.outcome}:
        return "NO VERDICT"  # Hypothesis gave up on a test: run it again
    return "SURVIVED"


def baseline(mutants: Sequence[Mutant], files: Sequence[str], snapshot: Path, budget: Budget,
             logs: Path, *, with_machine: bool, with_regression: bool) -> list[str]:
    """What fails on the unmutated tree (each failure makes every kill meaningless)."""
    problems = []
    with tempfile.TemporaryDirectory(prefix="mutant-baseline-") as tmp:
        scratch = Path(tmp)
        tree = scratch / "tree"
        copy_tree(files, tree, snapshot)
        if with_machine:
            # Twice a mutant's time: the unmutated tree runs every example to the end.
            result = machine(tree, scratch, replace(budget, seconds=2 * budget.seconds),
                             logs / "baseline.machine.log")
            if result.outcome != "survived":
                problems.append(f"the state machine on the unmutated tree: {result.outcome} "
                                f"(see {logs / 'baseline.machine.log'})")
        if with_regression:
            tests = sorted({m.regression for m in mutants})
            result = pytest(tests, tree=tree, scratch=scratch,
                            budget=budget.regression_seconds * len(tests),
                            log=logs / "baseline.regression.log")
            if result.outcome != "survived":
                problems.append(f"the regression tests on the unmutated tree: {result.outcome}"
                                f" (see {logs / 'baseline.regression.log'})")
    return problems


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default="", help="comma-separated mutant names")
    parser.add_argument("--examples", type=int, default=int(os.environ.get(
        "LEASEHOLD_SOAK_EXAMPLES", "5")), help="the machine's examples (make test's: 5)")
    parser.add_argument("--steps", type=int, default=int(os.environ.get(
        "LEASEHOLD_SOAK_STEPS", "25")), help="steps per example (make test's: 25)")
    parser.add_argument("--seed", type=int, default=0, help="the Hypothesis seed")
    parser.add_argument("--budget", type=float, default=300,
                        help="seconds the machine may take per mutant")
    parser.add_argument("--regression-budget", type=float, default=240,
                        help="seconds a regression test may take")
    parser.add_argument("--machine-only", action="store_true")
    parser.add_argument("--regression-only", action="store_true")
    parser.add_argument("--no-baseline", action="store_true",
                        help="skip the run on the unmutated tree")
    parser.add_argument("--logs", default=str(ROOT / ".mutants"),
                        help="where each run's output is kept")
    args = parser.parse_args(argv)
    named = {m.name: m for m in MUTANTS}
    asked = [name for name in args.only.split(",") if name]
    unknown = set(asked) - set(named)
    if unknown:
        parser.error(f"no such mutant: {', '.join(sorted(unknown))}")
    chosen = [named[name] for name in asked] if asked else list(MUTANTS)  # in the order asked
    stale = []
    for mutant in MUTANTS:
        try:
            check_applies(mutant)
        except Stale as exc:
            stale.append(f"{mutant.name}: {exc}")
    if stale:
        print("stale mutants (bring them up to date in tests/mutants/catalogue.py):",
              *stale, sep="\n", file=sys.stderr)
        return 2
    budget = Budget(args.examples, args.steps, args.seed, args.budget, args.regression_budget)
    with_machine, with_regression = not args.regression_only, not args.machine_only
    logs = Path(args.logs)
    logs.mkdir(parents=True, exist_ok=True)
    print(f"{len(chosen)} mutants; the machine at seed {budget.seed}, {budget.examples} "
          f"examples x {budget.steps} steps, at most {budget.seconds:.0f} s each; logs in "
          f"{logs}", flush=True)
    # The tree as it is now: every run below reads this copy, whatever is edited meanwhile.
    files = tree_files()
    snapshot = Path(tempfile.mkdtemp(prefix="mutants-tree-"))
    try:
        copy_tree(files, snapshot)
        return _run(chosen, files, snapshot, budget, logs, args.no_baseline, with_machine,
                    with_regression)
    finally:
        shutil.rmtree(snapshot, ignore_errors=True)


def _run(chosen: Sequence[Mutant], files: Sequence[str], snapshot: Path, budget: Budget,
         logs: Path, no_baseline: bool, with_machine: bool, with_regression: bool) -> int:
    if not no_baseline:
        problems = baseline(chosen, files, snapshot, budget, logs, with_machine=with_machine,
                            with_regression=with_regression)
        if problems:
            print("the unmutated tree fails:", *problems, sep="\n", file=sys.stderr)
            return 2
        print("the unmutated tree passes", flush=True)
    rows = []
    width = max(len(m.name) for m in chosen)
    header = f"{'mutant':<{width}}  {'state machine':<18}  {'regression test':<18}  verdict"
    print(header, flush=True)
    for mutant in chosen:
        by_machine, by_test = run_mutant(mutant, files, snapshot, budget, logs,
                                         with_machine=with_machine,
                                         with_regression=with_regression)
        row = (f"{mutant.name:<{width}}  {by_machine.shown():<18}  {by_test.shown():<18}  "
               f"{verdict(by_machine, by_test)}")
        rows.append((mutant, by_machine, by_test))
        print(row, flush=True)
    machine_kills = sum(1 for _, m, _ in rows if m.outcome == "killed")
    test_kills = sum(1 for _, _, t in rows if t.outcome == "killed")
    bad = [m.name for m, a, b in rows if verdict(a, b) != "killed"]
    unsure = [f"{m.name} ({a.outcome})" for m, a, _ in rows
              if a.outcome in ("flaky", "health-check")]
    print(f"\nthe state machine killed {machine_kills} of {len(rows)}; the regression tests "
          f"{test_kills} of {len(rows)}; survived, in error or without a verdict: "
          f"{', '.join(bad) or 'none'}")
    if unsure:
        print(f"the state machine gave no verdict (Hypothesis gave up on it, not a kill): "
              f"{', '.join(unsure)}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
