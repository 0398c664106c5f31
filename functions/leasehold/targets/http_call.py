"""Making an HTTP target's call: resolve once, check the address, connect to that address.

The connection never resolves the name a second time: it connects to the very address it
checked, and sends the name as the ``Host`` header and, over TLS, as the SNI name the
certificate is verified against. DNS rebinding between the check and the connection has
nothing to rebind. A redirect is followed only when the target says so, each hop through the
same check; a hop to another origin drops the target's auth (its secret never leaves the
origin it was meant for, and a secret goes only to the origins the deployment binds it to).

``timeout_seconds`` is an absolute deadline over the whole call (connect, TLS, headers, body,
every hop): a socket timeout alone is reset by every byte a trickling server sends, so a
timer shuts the socket at the deadline. The call therefore never outlives its deadline, and
the attempt's own timeout (the call's plus :data:`~.http_spec.CALL_SLACK_SECONDS`) is never
what ends it: the host's flow slot is held until the call is really over, and a retry
cannot overlap it.

Every text the call returns or raises goes through :mod:`.redaction` with the secret values
it sent.
"""

from __future__ import annotations

import contextlib
import email.utils
import http.client
import ipaddress
import json
import socket
import ssl
import time
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from leasehold.errors import NonRetryableError
from leasehold.targets.addresses import allowed, literal
from leasehold.targets.config import TargetConfig, origin
from leasehold.targets.deadline import Deadline
from leasehold.targets.failures import (
    AddressRefused,
    HttpNetworkError,
    HttpTimeout,
    RequestRefused,
    SecretRefused,
    TargetFailed,
    status_error,
)
from leasehold.targets.http_spec import parse_url
from leasehold.targets.redaction import Redactor

#: The response body a result keeps, in bytes; past it the result says ``truncated``.
RESULT_BODY_BYTES = 32 * 1024
MAX_REDIRECTS = 5
REDIRECTS = (301, 302, 303, 307, 308)

Resolver = Callable[..., list[Any]]
Connector = Callable[[tuple[str, int], float], socket.socket]


def _connect(address: tuple[str, int], timeout: float) -> socket.socket:
    return socket.create_connection(address, timeout=timeout)


def _resolve(*args: Any) -> list[Any]:
    # Looked up at each call (not bound at import), so a test's fake resolver applies.
    return socket.getaddrinfo(*args)


@dataclass(frozen=True)
class Caller:
    """What one deployment's HTTP calls need: its rules, and (for tests) the resolver and
    the connector; ``now_ms`` is the application's clock (a Retry-After's time is on it)."""

    config: TargetConfig
    now_ms: Callable[[], int]
    resolve: Resolver = _resolve
    connect: Connector = _connect
    #: Reads a secret the deployment names (``leasehold.targets.secrets``).
    secret: Callable[[str], str] = field(default=lambda name: "")
    #: Signs a request with the targets role's credentials (``leasehold.targets.signing``):
    #: (method, url, headers, body, auth).
    sign: Callable[..., dict[str, str]] | None = None

    def open(self, host: str, port: int, timeout: float) -> socket.socket:
        """A socket to an address of ``host`` that may be reached, or AddressRefused; the
        resolution and the connection together within ``timeout``."""
        ends = time.monotonic() + timeout
        try:
            address = literal(host)
        except ValueError as exc:
            raise AddressRefused(f"{host!r}: {exc}") from exc
        if address is not None:
            addresses = [address]
        else:
            try:
                infos = self.resolve(host, port, 0, socket.SOCK_STREAM)
            except OSError as exc:
                raise HttpNetworkError(f"cannot resolve {host}: {exc}") from exc
            addresses = [ipaddress.ip_address(info[4][0].split("%")[0]) for info in infos]
        if not addresses:
            raise HttpNetworkError(f"{host} has no address")
        # Every answer is checked: a name that also resolves to a private address is refused
        # outright, not raced against its public one.
        for found in addresses:
            why = allowed(self.config, host, found)
            if why is not None:
                raise AddressRefused(f"{host} may not be reached: {why}")
        last: OSError | None = None
        for found in dict.fromkeys(addresses):
            left = ends - time.monotonic()
            if left <= 0:
                raise HttpTimeout(f"connecting to {host} timed out")
            try:
                return self.connect((str(found), port), left)
            except TimeoutError as exc:
                raise HttpTimeout(f"connecting to {host} timed out") from exc
            except OSError as exc:
                last = exc
        raise HttpNetworkError(f"cannot connect to {host}: {last}") from last


class _Plain(http.client.HTTPConnection):
    def __init__(self, caller: Caller, host: str, port: int, deadline: Deadline) -> None:
        super().__init__(host, port, timeout=max(0.001, deadline.left()))
        self._caller = caller
        self._deadline = deadline

    def connect(self) -> None:
        self.sock = self._deadline.hold(
            self._caller.open(self.host, self.port, self._deadline.left()))


class _Tls(http.client.HTTPSConnection):
    def __init__(self, caller: Caller, host: str, port: int, deadline: Deadline) -> None:
        self._tls = ssl.create_default_context()
        super().__init__(host, port, timeout=max(0.001, deadline.left()), context=self._tls)
        self._caller = caller
        self._deadline = deadline

    def connect(self) -> None:
        sock = self._deadline.hold(
            self._caller.open(self.host, self.port, self._deadline.left()))
        # SNI and certificate checked against the name, while the socket is to the address
        # that was checked. The handshake after the deadline holds the TLS socket, so a
        # trickled handshake is cut too.
        wrapped = self._tls.wrap_socket(sock, server_hostname=self.host,
                                        do_handshake_on_connect=False)
        self.sock = self._deadline.hold(wrapped)
        wrapped.do_handshake()


def successful(status: int, success: list[Any]) -> bool:
    return any(status == item if isinstance(item, int) else str(status)[0] == item[0]
               for item in success)


def retry_at(value: str | None, now_ms: int) -> int | None:
    """A ``Retry-After`` (seconds, or an HTTP date) as a time on the clock, or None."""
    if not value:
        return None
    text = value.strip()
    if text.isdigit():
        return now_ms + int(text) * 1000
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        return None
    return max(now_ms, int(when.timestamp() * 1000))


def _body(payload: Mapping[str, Any]) -> tuple[bytes | None, str | None]:
    if "body" not in payload:
        return None, None
    body = payload["body"]
    if isinstance(body, str):
        return body.encode(), "text/plain; charset=utf-8"
    return json.dumps(body, separators=(",", ":")).encode(), "application/json"


def _read(response: http.client.HTTPResponse, sock: socket.socket | None,
          ends: float) -> tuple[bytes, int, bool]:
    """Up to :data:`RESULT_BODY_BYTES` of the body, its size (as far as known) and whether it
    was cut; never past the call's end."""
    kept = bytearray()
    size = 0
    while True:
        left = ends - time.monotonic()
        if left <= 0:
            raise HttpTimeout("the response body did not arrive within the call's timeout")
        if sock is not None:
            sock.settimeout(left)
        chunk = response.read(16 * 1024)
        if not chunk:
            return bytes(kept), size, False
        size += len(chunk)
        room = RESULT_BODY_BYTES - len(kept)
        kept += chunk[:room]
        if size > RESULT_BODY_BYTES:
            length = response.getheader("content-length")
            return bytes(kept), int(length) if length and length.isdigit() else size, True


def call(caller: Caller, payload: Mapping[str, Any], *,
         tenant: str | None = None) -> dict[str, Any]:
    """Make the target's call for the job's ``tenant``; its result, or the failure the job
    records, redacted of every secret value the call sent."""
    sent = Redactor()
    try:
        return _call(caller, payload, sent, tenant)
    except Exception as exc:
        if not sent:
            raise
        raise _redacted(exc, sent) from None  # the chain could quote the value


def _masked(result: dict[str, Any], sent: Redactor) -> dict[str, Any]:
    """The result with every form of the values the call sent masked."""
    if not sent:
        return result
    body = result["body"]
    return {**result, "headers": sent.value(result["headers"]),
            "body": sent.text(body, cut=result["truncated"]) if isinstance(body, str)
            else sent.value(body)}


def _redacted(exc: Exception, sent: Redactor) -> Exception:
    """``exc`` as the job records it: its type (and Retry-After), its message redacted."""
    message = sent.text(str(exc))
    if isinstance(exc, TargetFailed | NonRetryableError):
        try:
            clean = type(exc)(message)
        except TypeError:
            clean = TargetFailed(f"{type(exc).__name__}: {message}")
        if isinstance(exc, TargetFailed) and isinstance(clean, TargetFailed):
            clean.retry_at_ms = exc.retry_at_ms
        return clean
    return HttpNetworkError(f"{type(exc).__name__}: {message}")


def _call(caller: Caller, payload: Mapping[str, Any], sent: Redactor,
          tenant: str | None) -> dict[str, Any]:
    method = str(payload["method"])
    url = str(payload["url"])
    timeout = float(payload["timeout_seconds"])
    deadline = Deadline(time.monotonic() + timeout)
    try:
        return _hops(caller, payload, sent, deadline, method, url, tenant)
    finally:
        deadline.cancel()


def _hops(caller: Caller, payload: Mapping[str, Any], sent: Redactor, deadline: Deadline,
          method: str, url: str, tenant: str | None) -> dict[str, Any]:
    body, content_type = _body(payload)
    headers = dict(payload.get("headers", {}))
    if content_type and not any(h.lower() == "content-type" for h in headers):
        headers["Content-Type"] = content_type
    auth = payload.get("auth") or {}
    first = urllib.parse.urlsplit(url)[:2]
    for _hop in range(MAX_REDIRECTS + 1):
        parts = urllib.parse.urlsplit(url)
        out = dict(headers)
        if parts[:2] == first:  # the target's auth goes to its own origin only
            out.update(_auth(caller, auth, method, url, out, body, sent, tenant))
        status, answer, data, size, cut = _exchange(caller, parts, method, out, body,
                                                    deadline)
        location = answer.get("location")
        if status in REDIRECTS and payload.get("follow_redirects") and location:
            url = _next_hop(caller.config, url, location)
            if status == 303 or (status in (301, 302) and method == "POST"):
                method, body = "GET", None
                headers = {k: v for k, v in headers.items() if k.lower() != "content-type"}
            continue
        result = _masked(_result(status, answer, data, size, cut, payload["response_headers"],
                                 caller.config), sent)
        if successful(status, payload["success"]):
            return result
        # The message quotes the masked body (call() masks the message again, whole).
        error = status_error(status)(
            f"HTTP {status} from {parts.hostname}: "
            f"{json.dumps(result['body'])[:500] if result['body'] not in ('', None) else ''}")
        if status in (429, 503):
            error.retry_at_ms = retry_at(answer.get("retry-after"), caller.now_ms())
        raise error
    raise status_error(status)(f"more than {MAX_REDIRECTS} redirects from {payload['url']}")


def _next_hop(config: TargetConfig, url: str, location: str) -> str:
    try:  # the same URL rules as at submit
        parts = parse_url(config, urllib.parse.urljoin(url, location), name="Location")
    except Exception as exc:
        raise AddressRefused(f"redirect refused: {exc}") from exc
    return urllib.parse.urlunsplit(parts._replace(fragment=""))


def _auth(caller: Caller, auth: Mapping[str, Any], method: str, url: str,
          headers: Mapping[str, str], body: bytes | None, sent: Redactor,
          tenant: str | None) -> dict[str, str]:
    if "secret_header" in auth:
        spec = auth["secret_header"]
        value = _secret(caller, spec["secret"], url, sent, tenant)
        return {spec["name"]: f"{spec.get('prefix', '')}{value}"}
    if "sigv4" in auth and caller.sign is not None:
        return caller.sign(method, url, headers, body, auth["sigv4"])
    return {}


def _secret(caller: Caller, name: str, url: str, sent: Redactor, tenant: str | None) -> str:
    """The value of the deployment's secret ``name`` for ``tenant``'s call to ``url``:
    refused (not retried) when the secret is not bound to the URL's origin or granted to the
    tenant now (the deployment may have changed since the submission was checked; a
    schedule keeps its checked payload), or when the value could not be a header. A call
    made outside a job (``tenant`` None) is held to the origins only."""
    scope = caller.config.secret_scopes.get(name)
    where = origin(url)
    if scope is None or where not in scope.origins:
        raise SecretRefused(f"secret {name!r} may not be sent to {where}: the deployment "
                            "binds it to other origins")
    if tenant is not None and scope.tenants is not None and tenant not in scope.tenants:
        raise SecretRefused(f"secret {name!r} is not granted to tenant {tenant!r}")
    value = caller.secret(name)
    sent.add(value)
    if "\r" in value or "\n" in value:
        raise SecretRefused(f"secret {name!r} holds a line break (CR or LF), which no header "
                            "may carry (a trailing newline is a common slip): fix the "
                            "secret's value; the call was not made")
    return value


def _exchange(caller: Caller, parts: urllib.parse.SplitResult, method: str,
              headers: Mapping[str, str], body: bytes | None, deadline: Deadline
              ) -> tuple[int, dict[str, str], bytes, int, bool]:
    host = parts.hostname or ""
    tls = parts.scheme.lower() == "https"
    port = parts.port or (443 if tls else 80)
    if deadline.left() <= 0:
        raise HttpTimeout("no time left for the call")
    conn: http.client.HTTPConnection = (_Tls if tls else _Plain)(caller, host, port, deadline)
    path = urllib.parse.urlunsplit(("", "", parts.path or "/", parts.query, ""))
    try:
        conn.request(method, path, body=body, headers=dict(headers))
        if conn.sock is not None:
            conn.sock.settimeout(max(0.001, deadline.left()))
        response = conn.getresponse()
        answer = {k.lower(): v for k, v in response.getheaders()}
        data, size, cut = (b"", 0, False) if method == "HEAD" else \
            _read(response, conn.sock, deadline.ends)
        if deadline.passed:  # the timer shut the socket: what was read may be short
            raise HttpTimeout(f"{host} did not answer within the call's timeout")
        return response.status, answer, data, size, cut
    except (AddressRefused, HttpNetworkError):
        raise
    except ValueError as exc:
        # http.client refuses a header value it could not send (a line break in it): not
        # retried, and its text (which quotes the value) is not kept.
        raise RequestRefused(f"{host}: the request could not be sent: a header value is "
                             f"invalid ({type(exc).__name__})") from None
    except (OSError, http.client.HTTPException) as exc:
        if deadline.passed or isinstance(exc, TimeoutError):
            raise HttpTimeout(f"{host} did not answer within the call's timeout") from exc
        raise HttpNetworkError(f"{host}: {type(exc).__name__}: {exc}") from exc
    finally:
        conn.close()


def _result(status: int, answer: Mapping[str, str], data: bytes, size: int, cut: bool,
            shown: list[str], config: TargetConfig) -> dict[str, Any]:
    text = data.decode("utf-8", errors="replace")
    body: Any = text
    if not cut and text:
        with contextlib.suppress(ValueError):
            body = json.loads(text)
    return {
        "status": status,
        "headers": {name: answer[name] for name in shown
                    if name in answer and name not in config.redact},
        "body": body,
        "body_bytes": size,
        "truncated": cut,
    }
