"""``leasehold console``: the web console on 127.0.0.1, for an API a browser cannot call itself.

Behind API Gateway every request needs a SigV4 signature, which a browser cannot make. This
command serves the console's files from the package and forwards the page's API calls to
``--url``, signed with the caller's AWS credentials when ``--aws-auth`` is given (service
``execute-api``; region from the URL, else ``--region``, else the session).

A local signing proxy must not sign for anyone else: it listens on 127.0.0.1 only, answers only
requests whose Host is its own (a DNS-rebinding page has another), and forwards only calls that
carry ``X-Leasehold-Console``, a header a cross-site page cannot send without a CORS preflight,
which this server never grants.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from http.server import ThreadingHTTPServer
from typing import Any

from leasehold import console
from leasehold.cli.client import DEFAULT_URL, ApiError, region_of, sign
from leasehold.cli.parsing import command
from leasehold.local.gateway import AnyMethodHandler, end_with

DEFAULT_PORT = 8081
#: The page's own marker (see ``static/api.js``); required on every forwarded call.
MARKER = "x-leasehold-console"
#: Request headers passed on: what the API reads. Cookies and the browser's other headers stay.
FORWARDED = ("accept", "content-type", "x-leasehold-tenant")
#: Response headers never copied back: hop-by-hop ones, and those this server sets itself.
NOT_COPIED = {"connection", "keep-alive", "transfer-encoding", "content-length", "upgrade",
              "proxy-authenticate", "trailer", "te", "date", "server"}
#: API Gateway refuses larger bodies anyway; do not read more than it would accept.
MAX_BODY = 10 * 1024 * 1024
_WITH_BODY = {"POST", "PUT", "PATCH"}


@dataclass(frozen=True)
class Reply:
    status: int
    headers: list[tuple[str, str]]
    body: bytes


#: The API's Swagger UI (``/docs``, its document at ``/docs?format=json``).
DOCS = "/docs"


def _error(status: int, code: str, message: str) -> Reply:
    body = json.dumps({"error": {"code": code, "message": message, "field": None}}).encode()
    return Reply(status, [("Content-Type", "application/json")], body)


@dataclass
class Upstream:
    """The API the console talks to, and how requests to it are signed."""

    url: str
    aws_auth: bool = False
    region: str | None = None
    timeout: float = 30.0
    session: Any = field(default=None, repr=False)

    def forward(self, method: str, target: str, headers: Mapping[str, str],
                body: bytes | None) -> Reply:
        url = self.url.rstrip("/") + target
        sent = {name: value for name, value in headers.items() if name.lower() in FORWARDED}
        if body is None and method in _WITH_BODY:
            body = b""  # an explicit empty body: some front doors refuse a POST without length
        try:
            if self.aws_auth:
                sent = sign(method, url, body, sent, region=self.region, session=self.session)
            request = urllib.request.Request(url, data=body, headers=sent, method=method)
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                return Reply(response.status, list(response.headers.items()), response.read())
        except urllib.error.HTTPError as exc:
            return Reply(exc.code, list(exc.headers.items()), exc.read())
        except ApiError as exc:
            return _error(502, exc.code, str(exc))
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            return _error(502, "unreachable", f"cannot reach {self.url} ({reason})")


class _Handler(AnyMethodHandler):
    server: ConsoleServer

    def _serve(self) -> None:
        reply = self._answer()
        self.send_response(reply.status)
        for name, value in reply.headers:
            if name.lower() not in NOT_COPIED:
                self.send_header(name, value)
        self.send_header("Content-Length", str(len(reply.body)))
        end_with(self, reply.body)

    def _answer(self) -> Reply:
        if (self.headers.get("Host") or "").lower() not in self.server.hosts:
            return _error(403, "forbidden", "this console answers only to its own address")
        path = urllib.parse.urlsplit(self.path).path
        if self.command in ("GET", "HEAD"):
            found = console.route(path)
            if found is not None:
                headers = [("Content-Type", found.content_type), *console.HEADERS.items()]
                return Reply(200, headers, found.body)
        # The API's Swagger UI (page and document; GET only, nothing of any tenant's in it)
        # is opened by hand in the browser, so it carries no marker: ``/docs`` is forwarded.
        if self.headers.get(MARKER) != "1" and not (self.command == "GET"
                                                     and path == DOCS):
            return _error(403, "forbidden",
                          "only the console page may call the API through this proxy")
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY:
            self.close_connection = True
            return _error(413, "payload_too_large", "body too large")
        body = self.rfile.read(length) if length else None
        return self.server.upstream.forward(self.command, self.path, dict(self.headers.items()),
                                            body)


class ConsoleServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, upstream: Upstream, port: int = DEFAULT_PORT,
                 host: str = "127.0.0.1") -> None:
        self.upstream = upstream
        super().__init__((host, port), _Handler)
        bound = self.server_address[1]
        self.hosts = frozenset(_hosts(host, bound))

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}/"


def _hosts(host: str, port: int) -> Iterable[str]:
    for name in {host, "127.0.0.1", "localhost"}:
        yield f"{name}:{port}"


def register(subparsers: Any) -> None:
    parser = command(
        subparsers, "console",
        "serve the web console on 127.0.0.1 and forward its API calls to --url; with "
        "--aws-auth each call is signed with your AWS credentials (SigV4, service "
        "execute-api), as API Gateway's IAM auth requires",
        ["leasehold console --url https://abc123.execute-api.eu-west-1.amazonaws.com/prod "
         "--aws-auth", "leasehold console --url http://127.0.0.1:8080 --port 9090"],
        run_console, client=False)
    parser.add_argument("--url", default=os.environ.get("LEASEHOLD_URL", DEFAULT_URL),
                        help=f"API base URL (default {DEFAULT_URL}, or $LEASEHOLD_URL), "
                             "e.g. --url https://abc123.execute-api.eu-west-1.amazonaws.com/prod")
    parser.add_argument("--aws-auth", action="store_true",
                        help="sign forwarded requests with SigV4 for API Gateway IAM auth")
    parser.add_argument("--region", default=None,
                        help="region to sign for (default: from the URL, else the session's), "
                             "e.g. --region eu-west-1")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT,
                        help=f"local port (default {DEFAULT_PORT}; 0: any free port), "
                             "e.g. --port 9090")


def _checked_url(url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"--url must be an http(s) URL, got {url!r}")
    if parts.query or parts.fragment:
        raise ValueError(f"--url must be the API's base URL, without ?query or #fragment: {url!r}")
    return url.rstrip("/")


def run_console(args: argparse.Namespace) -> int:
    try:
        url = _checked_url(args.url)
    except ValueError as exc:
        print(f"leasehold console: {exc}", file=sys.stderr)
        return 2
    if not 0 <= args.port <= 65535:
        print(f"leasehold console: --port must be 0..65535, got {args.port}", file=sys.stderr)
        return 2
    upstream = Upstream(url, aws_auth=args.aws_auth, region=args.region)
    signing = ""
    if args.aws_auth:
        import boto3

        upstream.session = boto3.session.Session()
        if upstream.session.get_credentials() is None:
            print("leasehold console: --aws-auth needs AWS credentials (none found: set a "
                  "profile or AWS_ACCESS_KEY_ID)", file=sys.stderr)
            return 2
        region = (args.region or region_of(url) or upstream.session.region_name
                  or os.environ.get("AWS_REGION"))
        if not region:
            print("leasehold console: cannot tell the API's region from the URL; give "
                  "--region", file=sys.stderr)
            return 2
        upstream.region = region
        signing = f", signed with SigV4 for execute-api in {region}"
    try:
        server = ConsoleServer(upstream, args.port)
    except OSError as exc:
        print(f"leasehold console: cannot listen on 127.0.0.1:{args.port} ({exc.strerror})",
              file=sys.stderr)
        return 2
    print(f"Console: {server.url}", flush=True)
    print(f"Forwarding API calls to {url}{signing}. Press Ctrl-C to stop.", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0
