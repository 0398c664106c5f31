"""Events follow committed changes: a worker killed after its batch's transitions commit and
before the batch's PutEvents must not lose those events for good (issue 24).

The kill is an injected ``crash`` on PutEvents (the process dies just before the call, after
every transition of the batch committed). Redelivery and a sweep then find nothing to do:
the jobs are SUCCEEDED, so nothing re-publishes them unless events come from the committed
rows themselves (the change-stream relay).
"""

from __future__ import annotations

import contextlib
from collections import Counter

from leasehold.aws.faults import Fault, FaultInjector, InjectedCrash
from leasehold.clock import FakeClock
from leasehold.core.registry import TaskRegistry
from leasehold.core.states import JobState
from leasehold.lifecycle import sweeper
from tests.conftest import MakeApp
from tests.integration.helpers import deliver
from tests.integration.test_event_batching import Bus, _app, _consume_one_batch, _submit


def test_a_worker_killed_before_its_batch_publishes_loses_no_event(
        make_app: MakeApp, registry: TaskRegistry, clock: FakeClock) -> None:
    app = _app(make_app, registry)
    bus = Bus(app)
    jobs = _submit(app, 10)
    injector = FaultInjector([Fault(target="eventbridge.PutEvents", kind="crash")])
    injector.install(app.clients.client("events"))
    with contextlib.suppress(InjectedCrash):
        _consume_one_batch(app)
    assert injector.dead  # killed after the transitions, before the batch's PutEvents
    injector.revive()  # a new worker process: redelivery, then a sweep, as in production
    clock.advance(app.settings.lease_seconds + 120)
    deliver(app)
    sweeper.sweep(app)
    deliver(app)
    assert all(app.store.get(job).state is JobState.SUCCEEDED for job in jobs)
    published = bus.published()
    assert published == Counter({(job, "Job Succeeded"): published[(job, "Job Succeeded")]
                                 for job in jobs})
    assert all(published[(job, "Job Succeeded")] >= 1 for job in jobs)
