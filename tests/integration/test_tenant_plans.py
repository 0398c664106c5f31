"""A tenant's plan (issue 44): a row of the tenants table over the deployment's limits, read
by every function at most once per ``PLAN_CACHE_SECONDS``."""

from __future__ import annotations

import pytest

from leasehold.aws.dynamo import to_av
from leasehold.clock import FakeClock
from leasehold.errors import ValidationError
from leasehold.lifecycle.app import Leasehold
from leasehold.tenancy.limits import Limits
from leasehold.tenancy.plans import PLAN_CACHE_SECONDS, limits_for, plan_item, set_plan


def test_a_plan_written_elsewhere_is_in_force_here_within_the_cache_period(
        app: Leasehold, clock: FakeClock) -> None:
    deployed = Limits.from_settings(app.settings)
    assert limits_for(app, "acme") == deployed  # no plan: the settings
    # Another process (an operator's) writes the plan.
    app.clients.dynamodb.put_item(TableName=app.settings.tenants_table, Item=to_av(
        {"tenant": plan_item("acme"), "max_live": 2, "rate": 4}))
    assert limits_for(app, "acme") == deployed  # this process read it a moment ago
    clock.advance(PLAN_CACHE_SECONDS)
    planned = limits_for(app, "acme")
    assert (planned.max_live, planned.rate, planned.burst) == (2, 4.0, deployed.burst)
    assert limits_for(app, "other") == deployed  # one tenant's plan is its own


def test_a_plan_may_lift_the_cap_and_refuses_nonsense(app: Leasehold) -> None:
    assert set_plan(app, "acme", max_live=0) == {"max_live": 0}
    assert not limits_for(app, "acme").capped
    for bad in ({"rate": 0}, {"burst": 0.5}, {"max_live": -1}, {}):
        with pytest.raises(ValidationError):
            set_plan(app, "acme", **bad)
