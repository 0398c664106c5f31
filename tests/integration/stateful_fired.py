"""How often each of the state machine's checks met the path it checks (issue 44).

An invariant that never meets a job in the state it checks passes idle: it proves nothing,
and a mutant it should kill survives. Each check calls :func:`fire` with its name and how
many jobs (or events) it checked on its path this time; :data:`FIRED` counts them over a
run. ``tests/integration/test_stateful.py`` reports the counts at the end of its module,
and ``make soak`` (``LEASEHOLD_REQUIRE_FIRED=1``) fails if any check stayed at 0.
"""

from __future__ import annotations

from collections import Counter

#: Every counted check, by the name it fires under (with, in brackets, the path it counts
#: when the name alone does not say). A new check adds its name here.
CHECKS: tuple[str, ...] = (
    "a bulk action acts within its request (a job it changed)",
    "a deterministic handler never stops as non-deterministic (a DEAD job)",
    "a job exists for exactly the committed orders (an order)",
    "a job re-run by hand after its deadline passed runs (a re-run)",
    "a paused job never started and holds no slot (a held job)",
    "a job carries its caller's trace (a span of a traced job)",
    "a remote lease's repeated finish answers as it was",
    "a remote zombie's request changes nothing",
    "a request sent again answers each item with the job it made (an item)",
    "a retry re-arms a timed-out callback (one that timed out again)",
    "a sleeping job holds no lease and is watched (a sleeping job)",
    "a stored step never runs again (a stored step)",
    "a zombie's finish lands only on its own lease",
    "a zombie's heartbeat lands only on its own lease",
    "at most one open window per debounce key (an open window)",
    "attempts stay in bounds (a job that ran)",
    "children are counted under the cap (a live child of a counted parent)",
    "children follow their ended parents (a child of a parent that ended)",
    "durable records keep their call order (a job with records)",
    "each job's counter counts its committed successes (a success)",
    "each lease fenced by a newer epoch",
    "effects applied once (a seam job its worker finished)",
    "event ids unique (a job that changed twice or more)",
    "every admission item keeps its share (an item in use)",
    "every event names a job that exists or existed",
    "every finished job carries its TTL (a finished job)",
    "every lease has a live holder (a RUNNING job)",
    "every live job has a way to wake (one that waits)",
    "every live job in the sweep index, within its bound",
    "a row sent first has its message in a queue (one without an entry)",
    "every slot of every key has a live holder (a held slot)",
    "every submit span names a job that exists or existed",
    "every submit span of every step names a job that exists or existed",
    "every tenant counts its live jobs (a tenant with one)",
    "no QUEUED row past its deadline after a sweep",
    "no attempt runs past its job's deadline (an attempt with one)",
    "no key runs more than its limit (a keyed job running)",
    "no referenced row deleted (a bulk delete that ran)",
    "no takeover before its lease expired",
    "no tenant above its cap (a tenant at it)",
    "no tenant above its cap, children included (a live child of a counted job)",
    "nothing expired ever ran (an expired job)",
    "nothing succeeds twice",
    "one live job per unique key (a key with a live holder)",
    "one live job per unique key (a live unique child)",
    "one live job per unique key (a live unique kid of a fan-out)",
    "the lean tenant counts its live counted jobs (one counted)",
    "old runs replay on their branch, new runs take the patch (a deploy)",
    "the relay goes on past a record it cannot read (one set aside)",
    "a bulk action leaves a job created after its request (one it left)",
    "a parent re-run by hand runs its cancelled child again (a re-run)",
    "a debounce window re-run by hand is not joined (a re-run)",
)

#: Check name -> how many times its path fired.
FIRED: Counter[str] = Counter()


def fire(name: str, n: int | bool = 1) -> None:
    """Count ``n`` firings of check ``name`` (one of :data:`CHECKS`)."""
    assert name in CHECKS, f"{name!r} is not in stateful_fired.CHECKS"
    FIRED[name] += int(n)


def idle() -> list[str]:
    """The checks that never met their path."""
    return [name for name in CHECKS if not FIRED[name]]


def report() -> str:
    width = max(len(name) for name in CHECKS)
    return "\n".join(f"  {name:<{width}}  {FIRED[name]}" for name in CHECKS)
