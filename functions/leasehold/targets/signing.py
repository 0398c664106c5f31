"""``auth.sigv4``: a request signed with the targets role's credentials, never the worker's.

Only a URL under one of the deployment's ``http_sigv4`` prefixes is signed, for the service
listed with it: checked at submission (``target.http.auth.sigv4``) and again here for each URL
signed, so a redirect within the origin but outside the prefix is not signed. The session is
the job's (its tenant and id in the session name), narrowed by a session policy to the
service's actions (``execute-api:Invoke`` on the one API and stage, for API Gateway) with
Leasehold's own resources denied. Signed at run time: the signature is never stored.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Mapping
from typing import Any

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest

from leasehold.errors import NonRetryableError
from leasehold.targets.config import TargetConfig
from leasehold.targets.credentials import TargetCredentials, Who, policy
from leasehold.targets.endpoints import signed_prefixes
from leasehold.targets.failures import TargetFailed


class NotSigned(TargetFailed, NonRetryableError):
    """The URL is not one the deployment lets ``sigv4`` sign."""

    code = "not_signed"


def _policy(config: TargetConfig, service: str, region: str,
            parts: urllib.parse.SplitResult) -> str:
    place = config.place
    if service == "execute-api":
        # https://<api id>.execute-api.<region>.<suffix>/<stage>/...: that API and stage.
        api = (parts.hostname or "").split(".")[0]
        stage = (parts.path or "/").lstrip("/").split("/")[0] or "*"
        resource = (f"arn:{place.partition}:execute-api:{region}:{place.account}:"
                    f"{api}/{stage}/*")
        return policy([("execute-api:Invoke", [resource])], config.own.patterns)
    return policy([(f"{service}:*", ["*"])], config.own.patterns)


class Signer:
    """``sign(method, url, headers, body, auth, who=...)``: the headers to add."""

    def __init__(self, config: TargetConfig, credentials: TargetCredentials,
                 default_region: str) -> None:
        self.config = config
        self.credentials = credentials
        self.default_region = default_region

    def __call__(self, method: str, url: str, headers: Mapping[str, str], body: bytes | None,
                 auth: Mapping[str, Any], *, who: Who | None = None) -> dict[str, str]:
        service = str(auth["service"])
        parts = urllib.parse.urlsplit(url)
        listed = [p for p in signed_prefixes(self.config.sigv4, parts) if p.service == service]
        if not listed:
            raise NotSigned(f"{parts.scheme}://{parts.netloc}{parts.path} is not under an "
                            f"http_sigv4 prefix listed for {service}: not signed")
        region = str(auth.get("region") or listed[0].region or self.default_region)
        credentials = self.credentials.get(who, _policy(self.config, service, region, parts))
        request = AWSRequest(method=method, url=url, data=body or b"", headers=dict(headers))
        SigV4Auth(credentials, service, region).add_auth(request)
        given = {h.lower() for h in headers}
        return {name: value for name, value in request.headers.items()
                if name.lower() not in given}
