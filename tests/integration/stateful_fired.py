"""How often each of the state machine's checks met the path it checks (issue 44).

An invariant that never meets a job in the state it checks passes idle: it proves nothing,
and a mutant it should kill survives. Each check calls :func:`fire` with its name and how
many jobs (or events) it checked on its path this time; :data:`FIRED` counts them over a
run. ``tests/integration/test_stateful.py`` reports the counts at the end of its module,
and ``make soak`` (``LEASEHOLD_REQUIRE_FIRED=1``) fails if any check stayed at 0.
"""

from __future__ import annotations

from collections import Counter

#: Check name -> how many times its path fired (0: registered, never fired).
FIRED: Counter[str] = Counter()


def fire(name: str, n: int | bool = 1) -> None:
    """Count ``n`` firings of check ``name`` (0 registers it: a check that ran idle)."""
    FIRED[name] += int(n)


def idle() -> list[str]:
    """The checks that ran and never fired."""
    return sorted(name for name, n in FIRED.items() if n == 0)


def report() -> str:
    width = max((len(name) for name in FIRED), default=0)
    return "\n".join(f"  {name:<{width}}  {FIRED[name]}" for name in sorted(FIRED))
