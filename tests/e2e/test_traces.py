"""``leasehold dev --otlp URL`` exports the spans of a job, in the caller's trace, from the
API process and from a worker process, to an OTLP/HTTP receiver this test runs (issue 35)."""

from __future__ import annotations

import json
import threading
import time
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
)

from tests.e2e.conftest import start_runtime

TRACE = "5bf92f3577b34da6a3ce929d0e0e4736"
CALLER = "10f067aa0ba902b7"


class Receiver(ThreadingHTTPServer):
    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        #: (service.name, process.pid, span name, trace id hex, parent span id hex)
        self.spans: list[tuple[str, int, str, str, str]] = []
        self.lock = threading.Lock()


class _Handler(BaseHTTPRequestHandler):
    server: Receiver

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        found = []
        for resource_spans in request.resource_spans:
            attributes = {a.key: a.value for a in resource_spans.resource.attributes}
            service = attributes["service.name"].string_value
            pid = attributes["process.pid"].int_value
            for scope in resource_spans.scope_spans:
                found += [(service, pid, span.name, span.trace_id.hex(),
                           span.parent_span_id.hex()) for span in scope.spans]
        with self.server.lock:
            self.server.spans += found
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    server = Receiver()
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def test_a_request_with_a_traceparent_yields_spans_in_its_trace_from_the_api_and_a_worker(
        receiver: Receiver) -> None:
    url = f"http://127.0.0.1:{receiver.server_address[1]}"
    runtime = start_runtime("--workers", "1", "--in-memory", "--otlp", url,
                            env={"OTEL_BSP_SCHEDULE_DELAY": "100"})
    try:
        request = urllib.request.Request(
            runtime.url + "/jobs", method="POST",
            data=json.dumps({"task": "echo", "payload": {"traced": True}}).encode(),
            headers={"Content-Type": "application/json", "X-Leasehold-Tenant": "default",
                     "traceparent": f"00-{TRACE}-{CALLER}-01"})
        with urllib.request.urlopen(request, timeout=30) as response:
            job_id = json.loads(response.read())["job_id"]
        runtime.wait_for([job_id])
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with receiver.lock:
                spans = [s for s in receiver.spans if s[3] == TRACE]
            if {name for _, _, name, _, _ in spans} >= {"leasehold submit echo",
                                                        "leasehold run echo"}:
                break
            time.sleep(0.2)
    finally:
        runtime.stop()
    by_name = {name: (service, pid, parent) for service, pid, name, _, parent in spans}
    submit_service, submit_pid, submit_parent = by_name["leasehold submit echo"]
    run_service, run_pid, _ = by_name["leasehold run echo"]
    assert submit_parent == CALLER
    assert submit_service == "leasehold" and run_service == "leasehold-worker"
    assert submit_pid == runtime.process.pid and run_pid != submit_pid
