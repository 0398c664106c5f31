"""A small HTTP client for the API: JSON in and out, errors as exceptions, optional SigV4."""

from __future__ import annotations

import argparse
import json
import os
import re
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any

DEFAULT_URL = "http://127.0.0.1:8080"


class ApiError(Exception):
    def __init__(self, status: int, code: str, message: str, field: str | None = None,
                 retry_after: str | None = None) -> None:
        self.status, self.code, self.field, self.retry_after = status, code, field, retry_after
        # No HTTP status means no answer: say what happened, not "0 unreachable".
        super().__init__(f"{status} {code}: {message}" if status else message)


def add_client_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--url", default=os.environ.get("LEASEHOLD_URL", DEFAULT_URL),
                        help=f"API base URL (default {DEFAULT_URL}, or $LEASEHOLD_URL), "
                             "e.g. --url http://127.0.0.1:9000")
    parser.add_argument("--tenant", default=os.environ.get("LEASEHOLD_TENANT"),
                        help="tenant header for the local runtime (ignored behind API "
                             "Gateway; or $LEASEHOLD_TENANT), e.g. --tenant acme")
    parser.add_argument("--aws-auth", action="store_true",
                        help="sign requests with SigV4 for API Gateway IAM auth, e.g. "
                             "--url https://abc.execute-api.eu-west-1.amazonaws.com/v1 "
                             "--aws-auth")
    parser.add_argument("--json", action="store_true",
                        help="print JSON for scripts instead of tables, e.g. --json | jq .state")


@dataclass
class Client:
    url: str
    tenant: str | None = None
    aws_auth: bool = False
    timeout: float = 30.0

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> Client:
        return cls(args.url.rstrip("/"), args.tenant, args.aws_auth)

    def request(self, method: str, path: str, body: Any = None,
                query: dict[str, Any] | None = None) -> Any:
        url = self.url + path
        if query:
            pairs = [(k, v) for k, vs in query.items() if vs is not None
                     for v in (vs if isinstance(vs, list) else [vs])]
            url += "?" + urllib.parse.urlencode(pairs)
        data = None if body is None else json.dumps(body).encode()
        headers = {"Accept": "application/json"}
        if data is not None:
            headers["Content-Type"] = "application/json"
        if self.tenant:
            headers["X-Leasehold-Tenant"] = self.tenant
        if self.aws_auth:
            headers = sign(method, url, data, headers)
        request = urllib.request.Request(url, data=data, headers=headers, method=method)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                text = response.read().decode()
        except urllib.error.HTTPError as exc:
            text = exc.read().decode(errors="replace")
            try:
                error = json.loads(text)["error"]
            except (ValueError, KeyError, TypeError):
                error = {"code": "http_error", "message": text[:200] or exc.reason}
            raise ApiError(exc.code, error.get("code", "error"), error.get("message", ""),
                           error.get("field"), exc.headers.get("Retry-After")) from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise ApiError(0, "unreachable",
                           f"cannot reach the API at {self.url} ({reason}): is `leasehold dev` "
                           "running, and is --url (or $LEASEHOLD_URL) right?") from None
        try:
            return json.loads(text) if text else None
        except ValueError:
            raise ApiError(0, "not_leasehold", f"{self.url} answered something that is not "
                                               "JSON: is --url the Leasehold API?") from None


#: ``https://{api}.execute-api.{region}.amazonaws.com/{stage}``: the region the API lives in.
_EXECUTE_API_HOST = re.compile(r"\.execute-api(?:-fips)?\.([a-z0-9-]+)\.amazonaws\.com(?:\.cn)?$")


def region_of(url: str) -> str | None:
    """The region in an API Gateway URL (None for a custom domain or a local URL)."""
    match = _EXECUTE_API_HOST.search(urllib.parse.urlsplit(url).hostname or "")
    return match.group(1) if match else None


def sign(method: str, url: str, data: bytes | None, headers: dict[str, str], *,
         region: str | None = None, session: Any = None) -> dict[str, str]:
    """SigV4 headers for API Gateway's IAM authorization (``execute-api``).

    The region is ``region``, else the one in the URL (an API in eu-west-1 must be signed for
    eu-west-1 whatever the profile's default), else the session's. A long-lived caller passes
    its ``session`` so refreshable credentials (assumed roles, SSO) are resolved once.
    """
    import boto3
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest

    session = session or boto3.session.Session()
    credentials = session.get_credentials()
    if credentials is None:
        raise ApiError(0, "no_credentials", "--aws-auth needs AWS credentials")
    region = (region or region_of(url) or session.region_name
              or os.environ.get("AWS_REGION", "us-east-1"))
    request = AWSRequest(method=method, url=url, data=data, headers=headers)
    SigV4Auth(credentials.get_frozen_credentials(), "execute-api", region).add_auth(request)
    return dict(request.headers.items())
