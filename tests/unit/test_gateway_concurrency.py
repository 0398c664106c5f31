"""The local gateway answers API requests concurrently, each with its own event and tenant.

Powertools keeps the request being answered on the resolver; the gateway used to take a lock
around every request because of it. Here a request is held inside its DynamoDB read (a
botocore hook on the real client, against moto) while a second request, from another tenant,
is sent: the second must be answered while the first is still held, and each answer must be
its own request's job.
"""

from __future__ import annotations

import json
import socket
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from leasehold.api.app import handle
from leasehold.api.context import TENANT_HEADER, ApiConfig
from leasehold.core.registry import TaskRegistry
from leasehold.lifecycle.app import Leasehold
from leasehold.local.gateway import Gateway
from tests.conftest import MakeApp

CONFIG = ApiConfig(trust_tenant_header=True)


@pytest.fixture
def served(make_app: MakeApp, registry: TaskRegistry) -> Iterator[tuple[Leasehold, str]]:
    registry.task("echo", pool="default")(lambda payload, ctx: payload)
    app = make_app()
    gateway = Gateway("127.0.0.1", 0, lambda event: handle(app, event, None, CONFIG))
    thread = threading.Thread(target=gateway.serve_forever, daemon=True)
    thread.start()
    try:
        yield app, gateway.url
    finally:
        gateway.shutdown()
        gateway.server_close()


def _call(url: str, method: str, path: str, tenant: str, body: Any = None,
          timeout: float = 10.0) -> tuple[int, dict[str, Any]]:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url + path, data=data, method=method, headers={
        TENANT_HEADER: tenant, "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def _submit(url: str, tenant: str) -> str:
    status, body = _call(url, "POST", "/jobs", tenant, {"task": "echo", "payload": tenant})
    assert status == 201, body
    return str(body["job_id"])


def test_a_request_held_in_its_handler_does_not_hold_another(
        served: tuple[Leasehold, str]) -> None:
    app, url = served
    job_a, job_b = _submit(url, "tenant-a"), _submit(url, "tenant-b")
    inside, other_answered = threading.Event(), threading.Event()
    seen_while_held: list[bool] = []

    def hold_a(params: dict[str, Any], **_: Any) -> None:
        if job_a in json.dumps(params.get("body") or params, default=str):
            inside.set()
            seen_while_held.append(other_answered.wait(5.0))

    app.clients.dynamodb.meta.events.register("before-call.dynamodb.GetItem", hold_a)
    answers: dict[str, tuple[int, dict[str, Any]]] = {}
    first = threading.Thread(
        target=lambda: answers.__setitem__("a", _call(url, "GET", f"/jobs/{job_a}", "tenant-a")))
    first.start()
    assert inside.wait(5.0), "the first request never reached its read"
    try:
        answers["b"] = _call(url, "GET", f"/jobs/{job_b}", "tenant-b", timeout=3.0)
        other_answered.set()
    finally:
        other_answered.set()
        first.join(10.0)
    assert seen_while_held == [True], "the second request waited for the first"
    status_a, body_a = answers["a"]
    status_b, body_b = answers["b"]
    assert (status_a, body_a["job_id"], body_a["payload"]) == (200, job_a, "tenant-a")
    assert (status_b, body_b["job_id"], body_b["payload"]) == (200, job_b, "tenant-b")


def test_concurrent_requests_from_many_tenants_each_get_their_own_answer(
        served: tuple[Leasehold, str]) -> None:
    """Many threads at once, each fetching its own tenant's job, and another tenant's (a 404
    for a tenant that does not own it): no answer carries another request's tenant or id."""
    _, url = served
    tenants = [f"tenant-{i}" for i in range(8)]
    jobs = {tenant: _submit(url, tenant) for tenant in tenants}
    failures: list[str] = []
    start = threading.Barrier(len(tenants))

    def client(index: int) -> None:
        tenant = tenants[index]
        stranger = tenants[(index + 1) % len(tenants)]
        start.wait()
        for _ in range(5):
            status, body = _call(url, "GET", f"/jobs/{jobs[tenant]}", tenant)
            if (status, body.get("job_id"), body.get("payload")) != (200, jobs[tenant], tenant):
                failures.append(f"{tenant} own: {status} {body}")
            status, body = _call(url, "GET", f"/jobs/{jobs[stranger]}", tenant)
            if status != 404:
                failures.append(f"{tenant} read {stranger}'s job: {status} {body}")

    threads = [threading.Thread(target=client, args=(i,)) for i in range(len(tenants))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30.0)
    assert failures == []


def _resolver_with_a_meeting_point(resolver: Any) -> Any:
    """A resolver with one route whose requests meet (a barrier in a middleware, after the
    resolver took in the event and before the route reads its path argument), then answer
    with what each sees: its path argument, its tenant header and its routing context."""
    from aws_lambda_powertools.event_handler.api_gateway import Router

    router = Router()
    meet = threading.Barrier(2, timeout=5.0)

    def meeting(app: Any, next_middleware: Any) -> Any:
        meet.wait()
        return next_middleware(app)

    @router.get("/echo/<name>", middlewares=[meeting])
    def echo(name: str) -> dict[str, Any]:
        return {"name": name, "tenant": router.current_event.headers.get(TENANT_HEADER),
                "who": router.context.get("who")}

    resolver.include_router(router)
    resolver.build_middleware_stacks()
    return resolver


@pytest.mark.parametrize("name", ["a", "b"])
def test_requests_in_flight_together_never_see_each_others_state(name: str) -> None:
    from leasehold.api.app import ConcurrentRestResolver
    from leasehold.local.gateway import proxy_event

    resolver = _resolver_with_a_meeting_point(ConcurrentRestResolver(enable_validation=True))
    answers: dict[str, Any] = {}

    def ask(who: str) -> None:
        resolver.append_context(who=who)
        event = proxy_event("GET", f"/echo/{who}", {TENANT_HEADER: f"tenant-{who}"})
        answers[who] = json.loads(resolver.resolve(event, None)["body"])

    threads = [threading.Thread(target=ask, args=(who,)) for who in ("a", "b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10.0)
    assert answers[name] == {"name": name, "tenant": f"tenant-{name}", "who": name}


def test_many_clients_connecting_at_once_are_all_held_until_accepted() -> None:
    """Sixty-four clients connect while the gateway is busy and accepts nobody: the kernel
    must hold every connection (a backlog of 5 dropped the rest, and clients saw resets)."""
    gateway = Gateway("127.0.0.1", 0, lambda event: {"statusCode": 200, "body": "{}"})
    try:
        host, port = gateway.server_address[:2]
        held = []
        for _ in range(64):
            client = socket.socket()
            client.settimeout(2.0)
            try:
                client.connect((str(host), port))
            except OSError:
                client.close()
                break
            held.append(client)
        connected = len(held)
        for client in held:
            client.close()
        assert connected == 64
    finally:
        gateway.server_close()
