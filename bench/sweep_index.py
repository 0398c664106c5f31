"""What a long job costs in the sweep index: write units per job against its heartbeats.

A batch of jobs is submitted, leased, heartbeaten ``n`` times (every third of the lease, as
workers do, on a fake clock) with a sweeper pass once a minute (as the stack schedules it),
and finished, all
through the real store and sweeper on in-process moto with the :mod:`bench.metering` hooks
(units are computed from item sizes, so the emulator's speed does not matter here).
The lease is the deployed default (60 s), so the sweeper moves a running job's bound at most
once per lease. ``before`` is the old ``leases`` index, whose key moved on the lease and on
every heartbeat: 1 (enter) + 2 (lease) + 2 per heartbeat + 1 (leave), each entry under 1 KB.
Since issue 46 a plain job is sent before its row is put and its row has no sweep entry, so
it costs the index nothing however long it runs: SQS's visibility timeout is its sweeper.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from moto import mock_aws

from bench.local import TASKS, fake_credentials
from bench.metering import Meter
from leasehold.aws import provision
from leasehold.aws.definitions import JOBS, SWEEP_INDEX
from leasehold.clock import FakeClock
from leasehold.compose import compose
from leasehold.core.registry import load_modules
from leasehold.core.spec import JobSpec
from leasehold.core.states import JobState
from leasehold.lifecycle import sweeper
from leasehold.lifecycle.store import Change
from leasehold.lifecycle.submission import submit
from leasehold.settings import Settings


def old_index_units(heartbeats: int) -> int:
    return 1 + 2 + 2 * heartbeats + 1


def long_jobs(heartbeats: Sequence[int], *, batch: int = 10) -> list[dict[str, Any]]:
    fake_credentials()
    load_modules((TASKS,))
    with mock_aws():
        clock = FakeClock()
        prefix = "x" + uuid.uuid4().hex[:6]
        settings = Settings(task_modules=(TASKS,), queue_prefix=prefix, **{
            f"{role}_table": f"{prefix}-{role}" for role in
            ("jobs", "schedules", "tenants", "coordination", "workflows")})
        app = compose(settings, clock=clock)
        provision.create_all(app.clients, settings)
        meter = Meter(app.clients, settings)
        lease_ms = int(settings.lease_seconds * 1000)
        index = f"{JOBS.role}/{SWEEP_INDEX.name}"
        rows = []
        for n in heartbeats:
            tenant = "s" + uuid.uuid4().hex[:10]
            meter.reset()
            jobs = [submit(app, JobSpec(task="bench.noop", tenant=tenant)).job
                    for _ in range(batch)]
            leased = [app.store.lease(job.job_id, job.epoch, owner="bench", actor="bench",
                                      now=app.now(), expires_at=app.now() + lease_ms)
                      for job in jobs]
            sweeps = meter.reset()
            moves = 0
            for beat in range(1, n + 1):
                clock.advance(settings.lease_seconds / 3)
                leased = [app.store.update_running(job, owner="bench", conflict=LookupError,
                                                   set={"lease_expires_at": app.now() + lease_ms})
                          for job in leased]
                if beat % 3:
                    continue  # the sweeper runs every minute, a heartbeat every 20 s
                report = sweeper.sweep(app)
                assert report.recovered == report.redispatched == 0, report
                moves += report.moved
            for job in leased:
                app.store.transition(job, Change(target=JobState.SUCCEEDED, actor="bench",
                                                 owner="bench", set={"finished_at": app.now()}),
                                     now=app.now())
            meter.usage.add(sweeps)
            usage = meter.reset()
            rows.append({
                "heartbeats": n,
                "minutes_running": round(n * settings.lease_seconds / 3 / 60, 1),
                "index_write_units": round(usage.write_units.get(index, 0.0) / batch, 2),
                "index_write_units_before": old_index_units(n),
                "jobs_table_write_units": round(usage.write_units.get(JOBS.role, 0.0) / batch,
                                                2),
                "sweeper_moves_per_job": round(moves / batch, 2),
            })
        return rows
