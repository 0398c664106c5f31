"""What ``leasehold dev`` is asked to run (:class:`RuntimeOptions`, which the CLI fills from
its flags; see :mod:`leasehold.local.runtime`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from leasehold.time import ticker


@dataclass(kw_only=True)
class RuntimeOptions:
    host: str = "127.0.0.1"
    port: int = 8080
    #: More names (``name`` or ``name:port``) the API answers to beside 127.0.0.1, localhost
    #: and ``host``: every other ``Host`` is refused (see leasehold.local.gateway.OwnAddress).
    allowed_hosts: tuple[str, ...] = ()
    workers: int = 2
    concurrency: int = 4
    batch_size: int = 5
    tasks: tuple[str, ...] = ("examples.tasks",)
    pools: tuple[str, ...] = ("default",)
    endpoint: str | None = None
    lease_seconds: float = 30.0
    sweep_seconds: float = 2.0
    tick_seconds: float = 1.0
    #: A sweep or tick that finds nothing doubles the wait before the next one, up to these
    #: (a write through the API brings both back to their base pace at once); 0 turns the
    #: back-off off. The ticker's is also held below half its look-ahead.
    idle_sweep_seconds: float = 16.0
    idle_tick_seconds: float = 45.0
    heartbeat_seconds: float = 2.0
    drain_seconds: float = 30.0
    #: The ticker's leader lease; a standby takes over this long after the leader dies. It
    #: is renewed every third of it, idle or not: 30 s costs 0.1 PutItem/s (10 s cost 0.3,
    #: an eighth of an idle runtime's requests; issue 32).
    leader_lease_seconds: float = 30.0
    #: How far ahead the ticker fires (the Lambda ticker's 90 s by default; a loop that
    #: ticks every second could look less far, at the price of depending on the loop more).
    lookahead_seconds: float = ticker.LOOKAHEAD_SECONDS
    #: The job state event log (JSON lines); ``LEASEHOLD_EVENT_BUS`` in the environment wins,
    #: so the runtime can publish to a real EventBridge bus when pointed at AWS.
    event_log: str = ".leasehold/events.jsonl"
    #: Where the embedded emulator's tables are saved and loaded on start
    #: (:mod:`leasehold.local.state`), held by one runtime at a time; None keeps them in
    #: memory only.
    state_dir: str | None = ".leasehold"
    #: Start empty: the saved state and event log are moved aside (``*.old.<n>``), not
    #: deleted.
    fresh: bool = False
    #: How often the runtime saves what changed (:mod:`leasehold.local.keeper`), so a runtime
    #: that is killed (not stopped) loses about this much; 0 saves only on stop.
    save_seconds: float = 1.0
    #: With ``endpoint``: create the tables and queues that are missing (the embedded
    #: emulator is always provisioned). Otherwise a missing one stops the start, named.
    provision: bool = False
    #: Watch the task modules: on a change, import them again and restart the workers.
    reload: bool = False
    #: Every tenant's admission limits (``--tenant-rate``, ``--tenant-burst``,
    #: ``--tenant-max-live`` (0: no cap), ``--max-backlog``): settings of the runtime, so the
    #: API's admission and the workers' ``ctx.spawn`` apply the same ones. None: the
    #: ``LEASEHOLD_TENANT_*`` environment, else the defaults.
    tenant_rate: float | None = None
    tenant_burst: float | None = None
    tenant_max_live: int | None = None
    max_backlog: int | None = None

    #: Extra environment for the workers and the API (test knobs).
    env: dict[str, str] = field(default_factory=dict)
    #: External tasks (``--external POOL:TASK[,TASK]``): pool -> task names, run by workers
    #: in any language over HTTP (leasehold.remote); no Python worker polls these pools.
    external: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def limits(self) -> dict[str, Any]:
        """The tenant limits given, as ``Settings`` fields (the rest from the environment)."""
        return {name: value for name in ("tenant_rate", "tenant_burst", "tenant_max_live",
                                         "max_backlog")
                if (value := getattr(self, name)) is not None}
