"""A trigger that names a target: each matching event's job is the target's call, and an
HTTP target with no body sends the event as the request body."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from leasehold.cli import main
from leasehold.cli.client import Client as CliClient
from leasehold.core.states import JobState
from leasehold.lifecycle.app import Leasehold
from tests.conftest import MakeApp
from tests.integration.api_client import api_for
from tests.integration.target_server import Server, serve
from tests.integration.test_client_operations import client_for
from tests.integration.test_targets_http import loopback, run
from tests.unit.test_target_specs import BAD_TARGETS


@pytest.fixture
def server() -> Iterator[Server]:
    yield from serve()


@pytest.fixture
def app(make_app: MakeApp, server: Server) -> Leasehold:
    return make_app(targets=loopback(server))


def test_a_matching_event_is_the_http_targets_body(app: Leasehold, server: Server) -> None:
    api = api_for(app)
    made = api.post("/triggers", {"pattern": {"source": ["shop"]}, "input_path": "$.detail",
                                  "target": {"http": {"url": f"{server.url}/hook",
                                                      "method": "POST"}}})
    assert made.status == 201, made.body
    assert made.body["target"]["http"]["url"] == f"{server.url}/hook"
    put = api.post("/events", {"source": "shop", "detail-type": "order",
                               "detail": {"order": 7}})
    [job_id] = put.body["job_ids"]
    run(app)
    assert app.store.get(job_id).state is JobState.SUCCEEDED
    [request] = server.requests
    assert (request.method, request.path) == ("POST", "/hook")
    assert json.loads(request.body) == {"order": 7}


@pytest.mark.parametrize(("target", "field"), [BAD_TARGETS[0], BAD_TARGETS[5]])
def test_an_invalid_target_is_refused_and_nothing_is_written(
        app: Leasehold, target: Any, field: str) -> None:
    api = api_for(app)
    reply = api.post("/triggers", {"pattern": {"source": ["shop"]}, "target": target})
    assert reply.status == 422, reply.body
    assert field in json.dumps(reply.body)
    assert api.get("/triggers").body["triggers"] == []


def test_the_cli_creates_a_trigger_with_a_target_and_refuses_a_bad_one_naming_the_field(
        app: Leasehold, server: Server, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(CliClient, "from_args", classmethod(
        lambda cls, args: client_for(app, "acme")))
    target = json.dumps({"http": {"url": f"{server.url}/hook", "method": "POST"}})
    assert main(["triggers", "create", "--pattern", '{"source": ["shop"]}',
                 "--input-path", "$.detail", "--target", target]) == 0
    shown = capsys.readouterr().out
    assert f"{server.url}/hook" in shown
    put = api_for(app).post("/events", {"source": "shop", "detail-type": "order",
                                        "detail": {"order": 8}}, tenant="acme")
    [job_id] = put.body["job_ids"]
    run(app)
    assert app.store.get(job_id).state is JobState.SUCCEEDED
    assert json.loads(server.requests[0].body) == {"order": 8}

    assert main(["triggers", "create", "--pattern", '{"source": ["shop"]}',
                 "--target", '{"http": {"url": "file:///etc/passwd"}}']) == 1
    assert "target.http.url" in capsys.readouterr().err
    with pytest.raises(SystemExit) as both:  # one or the other, as argparse says
        main(["triggers", "create", "--pattern", "{}", "--task", "echo", "--target", target])
    assert both.value.code == 2
