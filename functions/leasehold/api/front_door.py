"""New work passes the features' front doors (``Leasehold.front_doors``) before its route.

The routes that accept new work from a tenant (a job, a batch, a workflow, a schedule, a
trigger, an event) ask ``app.admit_tenant`` first: a cell answers ``421 Misdirected`` for a
tenant homed in another Region (with the home's URL in the body and ``Leasehold-Home-Url``),
and 503 while it does not hold its Region lease. Other routes (reads, a job's cancel or
retry, remote workers) act on what this cell already holds and are never asked.
"""

from __future__ import annotations

from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response
from aws_lambda_powertools.event_handler.middlewares import NextMiddleware

from leasehold.api import context
from leasehold.api.errors import from_domain
from leasehold.errors import LeaseholdError

#: (method, route path) of every route that accepts new work from a tenant.
NEW_WORK = frozenset({("POST", "/jobs"), ("POST", "/jobs/batch"), ("POST", "/workflows"),
                      ("POST", "/schedules"), ("POST", "/triggers"), ("POST", "/events")})


def front_door(app: APIGatewayRestResolver, next_middleware: NextMiddleware) -> Response:
    event = app.current_event
    leasehold = context.leasehold(app)
    if leasehold.front_doors and (event.http_method, event.path) in NEW_WORK:
        try:
            tenant = context.tenant(app)
        except LeaseholdError:
            return next_middleware(app)  # the route answers who may not call it
        try:
            leasehold.admit_tenant(tenant, leasehold.now())
        except LeaseholdError as exc:
            return from_domain(exc)
    return next_middleware(app)
