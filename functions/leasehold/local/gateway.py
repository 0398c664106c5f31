"""A local stand-in for API Gateway: HTTP requests become REST proxy events for the api handler.

The event carries what API Gateway's REST proxy integration sends (method, path, multi-value
query and headers, body, a request context), so the handler cannot tell it is running locally.

Locally nothing authenticates a caller (the tenant is a header), so the gateway answers only
its own address and its own pages (:class:`OwnAddress`): a web page of another site must not
drive it through the developer's browser.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import re
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from leasehold.aws.isolation import switch_from
from leasehold.remote.hangup import CLIENT_GONE, closed

log = logging.getLogger(__name__)

Handler = Callable[[dict[str, Any]], dict[str, Any]]
#: Refuse bodies larger than API Gateway would (10 MiB) without reading them.
MAX_BODY = 10 * 1024 * 1024
#: A refused request's body up to this size is read (and dropped) before the answer.
REFUSED_BODY_DRAINED = 1024 * 1024


def proxy_event(method: str, target: str, headers: Mapping[str, str] | None = None,
                body: bytes | str | None = None, *, source_ip: str = "127.0.0.1"
                ) -> dict[str, Any]:
    """The API Gateway REST proxy event for one request (``target`` is path?query)."""
    url = urlsplit(target)
    multi = parse_qs(url.query, keep_blank_values=True)
    headers = dict(headers or {})
    raw = body.encode() if isinstance(body, str) else body
    text, encoded = None, False
    if raw:
        try:
            text = raw.decode()
        except UnicodeDecodeError:
            text, encoded = base64.b64encode(raw).decode(), True
    now = time.time()
    return {
        "resource": url.path, "path": url.path, "httpMethod": method.upper(),
        "headers": headers, "multiValueHeaders": {k: [v] for k, v in headers.items()},
        "queryStringParameters": {k: v[-1] for k, v in multi.items()} or None,
        "multiValueQueryStringParameters": multi or None,
        "pathParameters": None, "stageVariables": None,
        "requestContext": {
            "resourcePath": url.path, "httpMethod": method.upper(), "path": url.path,
            "stage": "local", "requestId": str(uuid.uuid4()), "accountId": "000000000000",
            "requestTime": time.strftime("%d/%b/%Y:%H:%M:%S +0000", time.gmtime(now)),
            "requestTimeEpoch": int(now * 1000), "protocol": "HTTP/1.1",
            "identity": {"sourceIp": source_ip, "userAgent": headers.get("User-Agent")},
        },
        "body": text, "isBase64Encoded": encoded,
    }


Address = tuple[str, int]
#: Names a local server always answers to, beside the address it listens on.
LOOPBACK_NAMES = ("127.0.0.1", "localhost")
#: A DNS name or an IP address (an IPv6 one without its brackets).
_HOSTNAME = re.compile(r"[a-z0-9._:-]+")


def _address(authority: str, default_port: int = 80) -> Address | None:
    """``Localhost:8080`` -> ``("localhost", 8080)``; None if it is not a host[:port]."""
    try:
        parts = urlsplit("//" + authority)
        port = parts.port
    except ValueError:
        return None
    if not parts.hostname or not _HOSTNAME.fullmatch(parts.hostname) \
            or parts.username is not None or parts.path or parts.query or parts.fragment:
        return None
    return parts.hostname.lower(), port if port is not None else default_port


@dataclass(frozen=True)
class OwnAddress:
    """The addresses a local server answers to; it refuses every request a web page of any
    other origin sends, and every request that names another host.

    * ``Origin``: a browser sends it with every cross-origin request and every POST, also a
      "simple" one (``text/plain``, a form) that needs no CORS preflight. A page of another
      origin is refused before its request reaches the API; curl and the SDKs send none.
    * ``Host``: a DNS-rebinding page (``evil.example`` made to resolve to 127.0.0.1) is
      same-origin with itself, so its requests carry its own name in ``Host``, never ours.
    """

    addresses: frozenset[Address]

    @classmethod
    def of(cls, host: str, port: int, extra: Iterable[str] = ()) -> OwnAddress:
        """``host`` as the server was bound, ``extra`` more names (``name`` or ``name:port``)
        its users reach it by, such as a LAN name when it listens on 0.0.0.0."""
        found = {(name, port) for name in (*LOOPBACK_NAMES, host.lower())}
        for name in extra:
            address = _address(name, default_port=port)
            if address is None:
                raise ValueError(f"not a host name or host:port: {name!r}")
            found.add(address)
        return cls(frozenset(found))

    def refusal(self, headers: Iterable[tuple[str, str]]) -> str | None:
        """Why a request with these headers is refused, or None to serve it."""
        pairs = [(name.lower(), value) for name, value in headers]
        hosts = [value for name, value in pairs if name == "host"]
        if len(hosts) != 1 or _address(hosts[0]) not in self.addresses:
            return (f"this server answers only to its own address ({self.names()}), not "
                    f"Host {', '.join(hosts) or 'missing'} (`leasehold dev --allow-host NAME` "
                    "adds a name)")
        for origin in (value for name, value in pairs if name == "origin"):
            scheme, _, authority = origin.partition("://")
            if scheme.lower() != "http" or _address(authority) not in self.addresses:
                return (f"requests from web pages of other origins are refused (Origin "
                        f"{origin}); only this server's own pages may call it")
        return None

    def names(self) -> str:
        return ", ".join(sorted(f"{name}:{port}" for name, port in self.addresses))


def end_with(handler: BaseHTTPRequestHandler, body: bytes) -> None:
    """End the answer's head and send ``body`` (none for HEAD) in one write: on a kept
    connection a second small write waits for the client's delayed ACK of the first (Nagle),
    40 ms an answer (measured through ``leasehold dev``)."""
    buffer: list[bytes] = handler._headers_buffer  # type: ignore[attr-defined]
    buffer.append(b"\r\n" + (b"" if handler.command == "HEAD" else body))
    handler.flush_headers()


class AnyMethodHandler(BaseHTTPRequestHandler):
    """A handler that serves every HTTP method with ``_serve``: API Gateway hands every
    method to its handler, which answers 404 or 405 itself, so the local servers do too."""

    protocol_version = "HTTP/1.1"

    def _serve(self) -> None:
        raise NotImplementedError

    def __getattr__(self, name: str) -> Any:
        # http.server dispatches to do_<METHOD>.
        if name.startswith("do_"):
            return self._serve
        raise AttributeError(name)

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s " + format, self.address_string(), *args)


class _RequestHandler(AnyMethodHandler):
    server: Gateway

    def _serve(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        refusal = self.server.own.refusal(self.headers.items())
        if refusal is not None:
            # The request never reaches the API. Its body is read only to be dropped: a
            # socket closed with unread data resets, and the browser would lose the answer.
            if 0 < length <= REFUSED_BODY_DRAINED:
                self.rfile.read(length)
            self._reply(403, {"Content-Type": "application/json"}, json.dumps({"error": {
                "code": "forbidden", "message": refusal, "field": None}}))
            self.close_connection = True
            return
        if length > MAX_BODY:
            self._reply(413, {"Content-Type": "application/json"}, json.dumps({"error": {
                "code": "payload_too_large", "message": "body too large", "field": None}}))
            self.close_connection = True
            return
        body = self.rfile.read(length) if length else None
        event = proxy_event(self.command, self.path, dict(self.headers.items()), body,
                            source_ip=self.client_address[0])
        # A long poll (POST /workers/lease) watches its caller: one that hung up gets
        # nothing leased to it (leasehold.remote.hangup).
        watch = CLIENT_GONE.set(lambda: closed(self.connection))
        try:
            # Concurrent: the api resolver keeps each request's state per thread.
            response = self.server.handler(event)
        except Exception:
            log.exception("the api handler failed")
            response = {"statusCode": 500, "headers": {"Content-Type": "application/json"},
                        "body": json.dumps({"error": {"code": "internal",
                                                      "message": "internal error",
                                                      "field": None}})}
        finally:
            CLIENT_GONE.reset(watch)
        headers = dict(response.get("headers") or {})
        for name, values in (response.get("multiValueHeaders") or {}).items():
            headers[name] = ", ".join(str(v) for v in values)
        payload = response.get("body") or ""
        data = base64.b64decode(payload) if response.get("isBase64Encoded") else payload
        self._reply(int(response["statusCode"]), headers, data)

    def _reply(self, status: int, headers: Mapping[str, str], data: str | bytes) -> None:
        raw = data.encode() if isinstance(data, str) else data
        self.send_response(status)
        for name, value in headers.items():
            if name.lower() not in ("content-length", "connection"):
                self.send_header(name, value)
        self.send_header("Content-Length", str(len(raw)))
        end_with(self, raw)

class Gateway(ThreadingHTTPServer):
    daemon_threads = True
    #: Connections the kernel holds before they are accepted. The default of 5 reset
    #: connections when 64 clients submitted at once (the bench's front door saw 47).
    request_queue_size = 256

    def __init__(self, host: str, port: int, handler: Handler,
                 allowed_hosts: Iterable[str] = ()) -> None:
        self.handler = handler
        allowed = tuple(allowed_hosts)
        OwnAddress.of(host, port, allowed)  # a bad name fails before the port is taken
        super().__init__((host, port), _RequestHandler)
        self.own = OwnAddress.of(host, self.server_address[1], allowed)

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}"


def wakes_background_loops(method: str, path: str) -> bool:
    """Whether an accepted API write should wake the backed-off ticker and sweeper.

    A job submission never needs them soon: a job due within SQS's 15-minute delay goes to
    SQS at once, a later one is due beyond the ticker's longest pause (30 s), and a new job's
    sweep bound is a lease ahead, beyond the sweeper's (half a lease). Waking both on every
    submission kept them querying every shard at their base pace while the API was busy
    (about 3 queries per job at 12 jobs/s, issue 21); other writes (schedules, cancels,
    retries, workflows) still wake them."""
    if method in ("GET", "HEAD", "OPTIONS"):
        return False
    path = path.rstrip("/")
    # A remote worker's lease and heartbeats (leasehold.remote) change nothing they watch.
    if path == "/workers/lease" or path.endswith("/heartbeat"):
        return False
    return not (method == "POST" and path == "/jobs")


# -- a cell's API while its Region is off -----------------------------------------------------

Answer = Callable[[dict[str, Any]], dict[str, Any]]


def isolating(answer: Answer, env: dict[str, str] | None = None) -> Answer:
    """``answer`` (the gateway's handler), refusing every request while the cell's Region is
    isolated (``LEASEHOLD_ISOLATE_FILE``): 503 at once, or, for ``hang``, after waiting for
    the Region to come back (at most 30 s, an API Gateway's own limit)."""
    switch = switch_from(os.environ if env is None else env)
    if switch is None:
        return answer

    def guarded(event: dict[str, Any]) -> dict[str, Any]:
        mode = switch.mode()
        if mode == "hang":
            deadline = time.monotonic() + 29
            while mode == "hang" and time.monotonic() < deadline:
                time.sleep(0.2)
                mode = switch.mode()
        if mode is None:
            return answer(event)
        body = {"error": {"code": "region_isolated", "field": None,
                          "message": "this cell's Region is isolated (leasehold regions "
                                     "isolate); `leasehold regions reconnect` brings it back"}}
        return {"statusCode": 503, "headers": {"Content-Type": "application/json"},
                "body": json.dumps(body)}

    return guarded
