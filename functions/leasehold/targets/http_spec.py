"""An HTTP target as a submission gives it, checked into the payload its task runs on.

Every field's error names it (``target.http.url``); nothing secret is ever in the payload:
a header the deployment redacts must come from ``auth.secret_header`` (read at run time)
or ``auth.sigv4`` (signed at run time), never as a literal the row would keep.
"""

from __future__ import annotations

import json
import re
import urllib.parse
from collections.abc import Mapping
from typing import Any

from leasehold.errors import ValidationError
from leasehold.targets.addresses import allowed, literal
from leasehold.targets.config import TargetConfig, origin
from leasehold.targets.endpoints import NO_ROLE, check_sigv4, check_url

METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")
MAX_BODY_BYTES = 128 * 1024
MAX_URL_CHARS = 2048
MAX_HEADERS = 50
DEFAULT_TIMEOUT_SECONDS = 30.0
#: 15 minutes: the longest a Lambda pool's attempt may run (an ECS pool's jobs could run
#: longer, but one HTTP call that long is a stuck call).
MAX_TIMEOUT_SECONDS = 900.0
#: The attempt's own timeout is the call's plus this: the call ends itself at its timeout
#: (``HttpTimeout``), and the worker's watch is the backstop.
CALL_SLACK_SECONDS = 2.0
#: Response headers a result keeps unless the target names its own.
DEFAULT_RESPONSE_HEADERS = ("content-type", "location", "etag", "retry-after")
_TOKEN = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}$")
_STATUS_CLASS = re.compile(r"^[1-5]xx$")
_FIELDS = {"url", "method", "headers", "body", "timeout_seconds", "success", "auth",
           "follow_redirects", "response_headers"}
_FORBIDDEN = {"host", "content-length", "transfer-encoding", "connection"}

F = "target.http"


def _fields(name: str, value: Any, known: set[str]) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ValidationError(name, "must be an object")
    unknown = set(value) - known
    if unknown:
        raise ValidationError(name, f"unknown field(s) {sorted(unknown)}; it takes "
                                    f"{', '.join(sorted(known))}")
    return value


def _text(name: str, value: Any, limit: int) -> str:
    if not isinstance(value, str) or not value:
        raise ValidationError(name, "must be a non-empty string")
    if len(value) > limit:
        raise ValidationError(name, f"must be at most {limit} characters")
    if re.search(r"[\x00-\x1f\x7f]", value):
        raise ValidationError(name, "must not contain control characters")
    return value


def parse_url(config: TargetConfig, url: Any, *, name: str = f"{F}.url",
              aws: bool = True) -> urllib.parse.SplitResult:
    """The URL split, or a ValidationError: http(s), a host, no credentials, a host that
    is an address literal only when that address may be reached, and (``aws``) an AWS
    endpoint only where the deployment lists it (:mod:`.endpoints`)."""
    text = _text(name, url, MAX_URL_CHARS)
    if re.search(r"\s", text):
        raise ValidationError(name, "must not contain spaces")
    if not text.isascii():
        raise ValidationError(name, "must be ASCII: percent-encode the path and query, and "
                                    "give an internationalized host in its xn-- form")
    try:
        parts = urllib.parse.urlsplit(text)
    except ValueError as exc:
        raise ValidationError(name, f"is not a URL: {exc}") from exc
    if parts.scheme.lower() not in ("http", "https"):
        raise ValidationError(name, f"must be an http or https URL, not {parts.scheme or 'none'!r}")
    if parts.username is not None or parts.password is not None:
        raise ValidationError(name, "must not carry credentials (user:password@): use "
                                    "auth.secret_header")
    try:
        host, port = parts.hostname, parts.port
    except ValueError as exc:
        raise ValidationError(name, f"has an invalid port: {exc}") from exc
    if not host:
        raise ValidationError(name, "has no host")
    del port
    try:
        address = literal(host)
    except ValueError as exc:
        raise ValidationError(name, f"has an invalid address: {exc}") from exc
    if address is not None and (why := allowed(config, host, address)) is not None:
        raise ValidationError(name, f"may not be reached: {why}")
    if aws:
        check_url(config.sigv4, config.allow_hosts, parts, name)
    return parts


def host_key(parts: urllib.parse.SplitResult) -> str:
    """The host as flow control keys it: the name, with the port when it is not the scheme's
    default (two services on one name are two hosts)."""
    host = (parts.hostname or "").lower()
    default = 443 if parts.scheme.lower() == "https" else 80
    return host if parts.port in (None, default) else f"{host}:{parts.port}"


def _success(value: Any) -> list[Any]:
    name = f"{F}.success"
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not items:
        raise ValidationError(name, 'must be "2xx" or a list of statuses (200, "3xx")')
    out: list[Any] = []
    for item in items:
        if (isinstance(item, str) and _STATUS_CLASS.match(item)) or \
                (isinstance(item, int) and not isinstance(item, bool) and 100 <= item <= 599):
            out.append(item)
        else:
            raise ValidationError(name, f"not a status or a class of them: {item!r}")
    return out


def _headers(config: TargetConfig, value: Any) -> dict[str, str]:
    name = f"{F}.headers"
    if not isinstance(value, Mapping):
        raise ValidationError(name, "must be an object of strings")
    if len(value) > MAX_HEADERS:
        raise ValidationError(name, f"at most {MAX_HEADERS} headers")
    out = {}
    for header, text in value.items():
        if not isinstance(header, str) or not _TOKEN.match(header):
            raise ValidationError(name, f"not a header name: {header!r}")
        if header.lower() in config.redact:
            # The row, its view and its events would keep it: a secret goes in at run time.
            raise ValidationError(f"{name}.{header}", "is a secret header this deployment "
                                  "never stores: send it with auth.secret_header (read at run "
                                  "time from a secret the deployment names) or auth.sigv4")
        if header.lower() in _FORBIDDEN:
            raise ValidationError(f"{name}.{header}", "is set by Leasehold, not the target")
        out[header] = _text(f"{name}.{header}", text, 8192) if text != "" else ""
        if not out[header].isascii():
            raise ValidationError(f"{name}.{header}", "must be ASCII text")
    return out


def _auth(config: TargetConfig, value: Any,
          parts: urllib.parse.SplitResult) -> dict[str, Any] | None:
    if value is None:
        return None
    name = f"{F}.auth"
    data = _fields(name, value, {"secret_header", "sigv4"})
    if len(data) != 1:
        raise ValidationError(name, "give one of secret_header or sigv4")
    if "secret_header" in data:
        sub = f"{name}.secret_header"
        header = _fields(sub, data["secret_header"], {"name", "secret", "prefix"})
        title = _text(f"{sub}.name", header.get("name"), 128)
        if not _TOKEN.match(title) or title.lower() in _FORBIDDEN:
            raise ValidationError(f"{sub}.name", f"not a header name: {title!r}")
        secret = _text(f"{sub}.secret", header.get("secret"), 256)
        if secret not in config.secrets:
            known = ", ".join(sorted(config.secrets)) or "none in this deployment"
            raise ValidationError(f"{sub}.secret", f"unknown secret {secret!r}; the deployment "
                                                   f"names: {known}")
        prefix = header.get("prefix", "")
        if prefix != "":
            prefix = _text(f"{sub}.prefix", prefix, 64)
        return {"secret_header": {"name": title, "secret": secret, "prefix": prefix}}
    sub = f"{name}.sigv4"
    sig = _fields(sub, data["sigv4"], {"service", "region"})
    service = _text(f"{sub}.service", sig.get("service"), 64)
    region = sig.get("region")
    region = None if region is None else _text(f"{sub}.region", region, 32)
    # A signature is the targets role's power: only for what the deployment lists.
    region = check_sigv4(config.sigv4, parts, service, region, sub)
    if config.role_arn is None:
        raise ValidationError(sub, NO_ROLE)
    return {"sigv4": {"service": service, "region": region}}


def _bound(config: TargetConfig, secret: str, parts: urllib.parse.SplitResult,
           tenant: str | None) -> None:
    """Refuse a secret outside the origins the deployment binds it to, or a tenant it does
    not grant it to. The error names the secret and the origin, never a value."""
    name = f"{F}.auth.secret_header.secret"
    scope = config.secret_scopes.get(secret)
    target = origin(parts)
    if scope is None or target not in scope.origins:
        raise ValidationError(name, f"secret {secret!r} may not be sent to {target}: the "
                                    "deployment binds it to other origins")
    if scope.tenants is not None and tenant not in scope.tenants:
        raise ValidationError(name, f"secret {secret!r} is not granted to tenant {tenant!r}")


def _body(value: Any) -> Any:
    """The body as stored: a string is sent as it is, anything else as JSON."""
    name = f"{F}.body"
    try:
        text = value if isinstance(value, str) else json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ValidationError(name, f"must be a string or JSON: {exc}") from exc
    if len(text.encode()) > MAX_BODY_BYTES:
        raise ValidationError(name, f"is {len(text.encode())} bytes; the limit is "
                                    f"{MAX_BODY_BYTES}")
    return value


def prepare(config: TargetConfig, value: Any, tenant: str | None = None
            ) -> tuple[dict[str, Any], dict[str, Any]]:
    """The HTTP task's payload for ``value`` submitted by ``tenant``, and the job defaults it
    implies (a concurrency key ``http:{host}`` with the host's limits, its throttle if
    configured, the attempt's timeout)."""
    data = _fields(F, value, _FIELDS)
    # An AWS endpoint is checked after auth: a sigv4 target's error names its sigv4.
    parts = parse_url(config, data.get("url"), aws=False)
    method = data.get("method", "GET")
    if not isinstance(method, str) or method.upper() not in METHODS:
        raise ValidationError(f"{F}.method", f"must be one of {', '.join(METHODS)}")
    timeout = data.get("timeout_seconds", DEFAULT_TIMEOUT_SECONDS)
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or \
            not 1 <= timeout <= MAX_TIMEOUT_SECONDS:
        raise ValidationError(f"{F}.timeout_seconds",
                              f"must be a number from 1 to {MAX_TIMEOUT_SECONDS:g}")
    follow = data.get("follow_redirects", False)
    if not isinstance(follow, bool):
        raise ValidationError(f"{F}.follow_redirects", "must be true or false")
    shown = data.get("response_headers", list(DEFAULT_RESPONSE_HEADERS))
    if not isinstance(shown, list) or len(shown) > MAX_HEADERS or \
            not all(isinstance(h, str) and _TOKEN.match(h) for h in shown):
        raise ValidationError(f"{F}.response_headers", "must be a list of header names")
    hidden = [h for h in shown if h.lower() in config.redact]
    if hidden:
        raise ValidationError(f"{F}.response_headers",
                              f"{hidden[0]} is redacted by this deployment")
    payload: dict[str, Any] = {
        "url": urllib.parse.urlunsplit(parts._replace(fragment="")),
        "method": method.upper(),
        "headers": _headers(config, data.get("headers", {})),
        "timeout_seconds": float(timeout),
        "success": _success(data.get("success", "2xx")),
        "follow_redirects": follow,
        "response_headers": sorted({h.lower() for h in shown}),
    }
    if "body" in data and data["body"] is not None:
        if payload["method"] in ("GET", "HEAD"):
            raise ValidationError(f"{F}.body", f"a {payload['method']} request has no body")
        payload["body"] = _body(data["body"])
    auth = _auth(config, data.get("auth"), parts)
    check_url(config.sigv4, config.allow_hosts, parts, f"{F}.url")
    if auth is not None:
        if "secret_header" in auth:
            _bound(config, auth["secret_header"]["secret"], parts, tenant)
        payload["auth"] = auth
    host = host_key(parts)
    limits = config.limits(host, (parts.hostname or "").lower())
    defaults: dict[str, Any] = {
        "concurrency": {"key": f"http:{host}", "limit": limits.concurrency},
        "timeout_seconds": float(timeout) + CALL_SLACK_SECONDS,
    }
    if limits.rate_per_second is not None:
        # A rate below one a second is one start per 1/rate seconds.
        rate = limits.rate_per_second
        defaults["throttle"] = ({"key": f"http:{host}", "limit": int(rate), "period_seconds": 1}
                                if rate >= 1 and float(rate).is_integer() else
                                {"key": f"http:{host}", "limit": 1, "period_seconds": 1 / rate})
    return payload, defaults
