"""The composition root: which features observe the store and what the sweeper repairs.

Every entry point (Lambda handlers, the local runtime, the CLI's workers, tests) builds its
application here, so the features below never import each other to wire themselves in.
"""

from __future__ import annotations

import random
from functools import partial

from leasehold.aws.clients import Clients
from leasehold.bulk.run import install as install_bulk
from leasehold.cells import install as install_cells
from leasehold.clock import Clock
from leasehold.core.enqueueing import install_enqueuer
from leasehold.core.registry import TaskRegistry
from leasehold.durable import install as install_durable
from leasehold.durable.references import referenced_children
from leasehold.events.publishing import install as install_events
from leasehold.flow import debounce, expiry, unique
from leasehold.flow import install as install_flow
from leasehold.lifecycle.app import Leasehold
from leasehold.metrics.figures import install as install_figures
from leasehold.remote import install as install_remote
from leasehold.settings import Settings
from leasehold.streams.enqueue import enqueue_item
from leasehold.streams.once import install as install_once
from leasehold.targets import install as install_targets
from leasehold.tenancy.counters import count_outcomes, slot_writes
from leasehold.tenancy.slots import install as install_slots
from leasehold.tracing import install as install_tracing
from leasehold.workflows.progress import install as install_workflows
from leasehold.workflows.reconcile import reconcile as reconcile_workflows
from leasehold.workflows.retention import referenced_steps


def compose(
    settings: Settings | None = None,
    *,
    clock: Clock | None = None,
    registry: TaskRegistry | None = None,
    clients: Clients | None = None,
    rng: random.Random | None = None,
) -> Leasehold:
    """The application with every feature installed (arguments as ``Leasehold.from_settings``)."""
    app = Leasehold.from_settings(settings, clock=clock, registry=registry, clients=clients,
                                  rng=rng)
    # A tenant's live-job slot taken in a transaction with its row (a manual retry, a
    # count-in, a durable child) goes back, and its outcome is counted (back-pressure and
    # /stats), in the same transaction that ends the job ...
    app.store.companions.append(slot_writes(app.settings))
    # ... except a submission's slot, taken by its own write before the row: given back by
    # a write after the end, and a slot a crash left between the two returned by the
    # sweeper's repair (docs/design.md, "A cap without transactions").
    install_slots(app)
    # The outcomes of every other job (schedules, triggers, workflows), for /stats: counted
    # once per batch of jobs.
    count_outcomes(app)
    # Per-task figures (succeeded, failed, duration and queue-wait histograms by minute and
    # hour), added once per batch of jobs, for GET /stats/tasks and the console.
    install_figures(app)
    # Workflows: a step that finishes counts itself on its dependents and releases them; the
    # sweeper redoes that for workflows that made no progress for a while.
    install_workflows(app)
    app.repairs["workflows"] = lambda app, now: reconcile_workflows(app, now=now).repaired
    # ... and refuse the delete of a step while its workflow exists (it may be retried).
    app.deletion_guards["workflow"] = referenced_steps
    # Flow control: a unique key's claim (taken with the row, given back with the end),
    # debounce windows, and start windows (refused at the lease, ended by the worker or the
    # sweeper).
    unique.install(app)
    debounce.install(app)  # before expiry: a window's start window counts from its fire time
    expiry.install(app)
    # Keyed flow control: a concurrency slot and a throttle's turn taken with the lease,
    # the slot given back with the change that ends the attempt, parked jobs woken.
    install_flow(app)
    # Job state events: to EventBridge, or a local log (``event_bus="file:<path>"``); with
    # ``events_from="stream"`` the change-stream relay (leasehold.streams) publishes them from
    # committed rows instead, and nothing publishes inline.
    if app.settings.events_from == "inline":
        install_events(app)
    # ctx.once: an external effect's result recorded per (job, name) with the fencing token.
    install_once(app)
    # leasehold.enqueue_item: a job in the application's own transaction, handed off by the
    # change-stream relay; it builds its entries with the last application composed.
    install_enqueuer(partial(enqueue_item, app))
    # Bulk actions run as jobs of the built-in task ``leasehold.bulk``.
    install_bulk(app)
    # Durable execution: ctx.step/sleep/callback/spawn/wait_for, and parents woken by
    # their children.
    install_durable(app)
    # A finished child is not deleted while its parent is live (it reads it when it wakes).
    app.deletion_guards["durable parent"] = referenced_children
    # Jobs with no code: ``target: {"http": ...}`` or ``{"aws": ...}`` resolved into the
    # built-in tasks leasehold.http and leasehold.aws, each attempt equipped with this
    # deployment's callers (its SSRF rules, secrets, per-host limits).
    install_targets(app)
    # Traces: the trace context a job continues, kept on its row; submit, run and step
    # spans (the OpenTelemetry API's no-op unless an SDK is configured).
    install_tracing(app)
    # Workers in any language: the deployment's external tasks, registered in their pools
    # so submissions accept them; remote workers lease them over HTTP (leasehold.remote).
    install_remote(app)
    # Cells with a home Region (LEASEHOLD_CELL_REGION): no lease or finish without this
    # cell's Region lease, and new work only for the tenants homed here (421 otherwise).
    install_cells(app)
    return app
