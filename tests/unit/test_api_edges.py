"""Pure pieces of the API edge: tenants from identities, cursors, the error map."""

from __future__ import annotations

import base64
from decimal import Decimal

import pytest

from leasehold.api.answers import decode_cursor, encode_cursor
from leasehold.api.context import ApiConfig, Unauthenticated, tenant_of
from leasehold.api.errors import BadRequest, from_domain
from leasehold.api.jobs import JOB_CURSOR
from leasehold.errors import (
    Conflict,
    IdempotencyConflict,
    NotFound,
    Overloaded,
    PayloadTooLarge,
    RateLimited,
    ValidationError,
)
from leasehold.local.gateway import proxy_event

LOCAL = ApiConfig(trust_tenant_header=True)
CLOUD = ApiConfig(trust_tenant_header=False)


def test_the_header_is_trusted_only_locally() -> None:
    event = proxy_event("GET", "/jobs", {"X-Leasehold-Tenant": "alice"})
    assert tenant_of(event, LOCAL) == "alice"
    assert tenant_of(proxy_event("GET", "/jobs"), LOCAL) == "default"
    with pytest.raises(Unauthenticated):
        tenant_of(event, CLOUD)


def test_verified_identities_win_over_the_header() -> None:
    event = proxy_event("GET", "/jobs", {"X-Leasehold-Tenant": "mallory"})
    event["requestContext"]["authorizer"] = {"claims": {"custom:tenant": "acme"}}
    assert tenant_of(event, LOCAL) == "acme"
    event["requestContext"]["authorizer"] = {}
    event["requestContext"]["identity"] = {
        "userArn": "arn:aws:sts::123456789012:assumed-role/Billing/session-9"}
    assert tenant_of(event, CLOUD) == "123456789012:role/Billing"
    event["requestContext"]["identity"] = {"userArn": "arn:aws:iam::123456789012:user/ops/bob"}
    assert tenant_of(event, CLOUD) == "123456789012:user/bob"  # a user's path is not identity


def test_a_malformed_tenant_header_is_a_validation_error() -> None:
    with pytest.raises(ValidationError) as raised:
        tenant_of(proxy_event("GET", "/", {"X-Leasehold-Tenant": "a b"}), LOCAL)
    assert raised.value.field == "tenant"


def test_cursor_round_trips_without_the_tenant() -> None:
    cursor = encode_cursor({"tenant": "alice", "created_at": Decimal(5), "job_id": "01AB"},
                           JOB_CURSOR)
    assert cursor is not None
    assert "alice" not in base64.urlsafe_b64decode(cursor + "==").decode()
    assert decode_cursor(cursor, JOB_CURSOR) == {"created_at": 5, "job_id": "01AB"}
    assert encode_cursor(None, JOB_CURSOR) is None


@pytest.mark.parametrize("bad", [
    "", "!!", "bm90IGpzb24", "WzEsMl0",
    base64.urlsafe_b64encode(b'{"created_at":"5","job_id":"01AB"}').decode(),  # wrong type
    base64.urlsafe_b64encode(b'{"created_at":5}').decode(),  # a key missing
])
def test_a_cursor_this_api_did_not_return_is_a_400_naming_it(bad: str) -> None:
    with pytest.raises(BadRequest) as raised:
        decode_cursor(bad, JOB_CURSOR)
    assert raised.value.field == "cursor"


@pytest.mark.parametrize(
    ("error", "status", "retry_after"),
    [
        (ValidationError("task", "bad"), 422, None),
        (PayloadTooLarge("payload", "big"), 413, None),
        (NotFound("gone"), 404, None),
        (Conflict("busy"), 409, None),
        (IdempotencyConflict("used"), 409, None),
        (RateLimited(retry_after=2.2), 429, "3"),
        (Overloaded(retry_after=10), 503, "10"),
        (BadRequest("eh"), 400, None),
        (Unauthenticated(), 401, None),
    ],
)
def test_every_domain_error_has_one_status(error: Exception, status: int,
                                           retry_after: str | None) -> None:
    response = from_domain(error)  # type: ignore[arg-type]
    assert response.status_code == status
    assert response.headers.get("Retry-After") == retry_after
