"""Sending one request: HTTP with urllib, SigV4 signing with botocore, retries that honour
``Retry-After``. Nothing heavy is imported until it is needed (botocore only to sign)."""

from __future__ import annotations

import email.utils
import os
import random
import re
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from leasehold.client.errors import ApiError

#: (method, url, headers, body, timeout) -> (status, headers, body). The default speaks HTTP;
#: :mod:`leasehold.testing` passes one that calls the API in-process.
Transport = Callable[[str, str, Mapping[str, str], bytes | None, float],
                     tuple[int, Mapping[str, str], bytes]]

#: Where a ``Client()`` built without ``url`` and ``transport`` sends its requests, when set:
#: (url, transport). ``leasehold.testing``'s fixture sets it for the length of a test.
_default_route: list[tuple[str, Transport]] = []


def set_default_transport(transport: Transport | None, url: str = "http://leasehold.test"
                          ) -> None:
    """Send the requests of every ``Client()`` built from here on without ``url`` and
    ``transport`` through ``transport`` (as ``url``), whatever ``$LEASEHOLD_URL`` says;
    None: HTTP to ``$LEASEHOLD_URL`` again. A client given a ``url`` still goes there."""
    _default_route[:] = [] if transport is None else [(url, transport)]


def default_route() -> tuple[str, Transport] | None:
    """What :func:`set_default_transport` set, if anything."""
    return _default_route[0] if _default_route else None


#: Answers worth another try: refused before anything was written (429, 503), or a gateway
#: or server fault whose request may or may not have landed (500, 502, 504).
REFUSED = frozenset({429, 503})
UNSURE = frozenset({500, 502, 504})
#: The longest ``Retry-After`` the client sleeps; beyond it the error is raised.
MAX_RETRY_AFTER = 60.0


def http(method: str, url: str, headers: Mapping[str, str], body: bytes | None,
         timeout: float) -> tuple[int, Mapping[str, str], bytes]:
    """One HTTP exchange with urllib; an HTTP error status is an answer, not an exception."""
    request = urllib.request.Request(url, data=body, headers=dict(headers), method=method)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, dict(response.headers.items()), response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers.items()), exc.read()


def trace_headers() -> dict[str, str]:
    """The current OpenTelemetry context as the configured propagators' headers (W3C
    ``traceparent`` / ``tracestate`` by default); empty without a current span, or without
    ``opentelemetry-api`` installed."""
    try:
        from opentelemetry.propagate import inject
    except ImportError:  # pragma: no cover - a dependency of the package
        return {}
    carrier: dict[str, str] = {}
    inject(carrier)
    return carrier


def retry_after(value: str | None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (seconds or an HTTP date)."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def unsure(exc: BaseException) -> bool:
    """A connection fault after which the request may have been sent (worth another try when
    the request is safe to repeat). A refused connection is not: nothing is listening."""
    reason = getattr(exc, "reason", exc)
    return not isinstance(reason, ConnectionRefusedError) and \
        isinstance(reason, TimeoutError | ConnectionError | OSError)


@dataclass(frozen=True)
class HttpRetries:
    """How the client tries again: ``attempts`` in all, backoff with full jitter."""

    attempts: int = 5
    base_seconds: float = 0.25
    max_seconds: float = 8.0

    def backoff(self, tries: int, hint: float | None) -> float:
        if hint is not None:
            return hint
        return random.uniform(0, min(self.max_seconds, self.base_seconds * 2 ** tries))


#: ``https://{api}.execute-api.{region}.amazonaws.com/{stage}``: the region the API lives in.
_EXECUTE_API_HOST = re.compile(r"\.execute-api(?:-fips)?\.([a-z0-9-]+)\.amazonaws\.com(?:\.cn)?$")


def region_of(url: str) -> str | None:
    """The region in an API Gateway URL (None for a custom domain or a local URL)."""
    match = _EXECUTE_API_HOST.search(urllib.parse.urlsplit(url).hostname or "")
    return match.group(1) if match else None


def sign(method: str, url: str, data: bytes | None, headers: Mapping[str, str], *,
         region: str | None = None, session: Any = None) -> dict[str, str]:
    """SigV4 headers for API Gateway's IAM authorization (``execute-api``).

    The region is ``region``, else the one in the URL (an API in eu-west-1 must be signed for
    eu-west-1 whatever the profile's default), else the session's. A long-lived caller passes
    its ``session`` (a botocore session) so refreshable credentials (assumed roles, SSO) are
    resolved once. Credentials come from the default chain: environment, profile, SSO, role.
    """
    import botocore.session
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest

    session = session or botocore.session.get_session()
    credentials = session.get_credentials()
    if credentials is None:
        raise ApiError(0, "no_credentials", "signing (aws_auth) needs AWS credentials: none "
                                            "found in the environment, profile or role")
    region = (region or region_of(url) or _session_region(session)
              or os.environ.get("AWS_REGION", "us-east-1"))
    request = AWSRequest(method=method, url=url, data=data, headers=dict(headers))
    SigV4Auth(credentials.get_frozen_credentials(), "execute-api", region).add_auth(request)
    return dict(request.headers.items())


def _session_region(session: Any) -> str | None:
    """The region a boto3 session (``region_name``) or a botocore session is configured for."""
    if hasattr(session, "region_name"):
        return session.region_name
    return session.get_config_variable("region")
