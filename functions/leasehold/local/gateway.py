"""A local stand-in for API Gateway: HTTP requests become REST proxy events for the api handler.

The event carries what API Gateway's REST proxy integration sends (method, path, multi-value
query and headers, body, a request context), so the handler cannot tell it is running locally.
"""

from __future__ import annotations

import base64
import json
import logging
import time
import uuid
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

log = logging.getLogger(__name__)

Handler = Callable[[dict[str, Any]], dict[str, Any]]
#: Refuse bodies larger than API Gateway would (10 MiB) without reading them.
MAX_BODY = 10 * 1024 * 1024


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
        if length > MAX_BODY:
            self._reply(413, {"Content-Type": "application/json"}, json.dumps({"error": {
                "code": "payload_too_large", "message": "body too large", "field": None}}))
            self.close_connection = True
            return
        body = self.rfile.read(length) if length else None
        event = proxy_event(self.command, self.path, dict(self.headers.items()), body,
                            source_ip=self.client_address[0])
        try:
            # Concurrent: the api resolver keeps each request's state per thread.
            response = self.server.handler(event)
        except Exception:
            log.exception("the api handler failed")
            response = {"statusCode": 500, "headers": {"Content-Type": "application/json"},
                        "body": json.dumps({"error": {"code": "internal",
                                                      "message": "internal error",
                                                      "field": None}})}
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
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(raw)

class Gateway(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, host: str, port: int, handler: Handler) -> None:
        self.handler = handler
        super().__init__((host, port), _RequestHandler)

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}"
