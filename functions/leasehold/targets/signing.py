"""``auth.sigv4``: a request signed with the worker's own credentials (its pool's role), for
API Gateway, Lambda function URLs and AWS endpoints. Signed at run time: the signature (an
``Authorization`` header) is never stored."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import boto3
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest

from leasehold.targets.failures import TargetFailed


class NoCredentials(TargetFailed):
    """The worker has no AWS credentials to sign the request with."""


def signer(default_region: str) -> Callable[..., dict[str, str]]:
    def sign(method: str, url: str, headers: Mapping[str, str], body: bytes | None,
             auth: Mapping[str, Any]) -> dict[str, str]:
        credentials = boto3.session.Session().get_credentials()
        if credentials is None:
            raise NoCredentials()
        request = AWSRequest(method=method, url=url, data=body or b"", headers=dict(headers))
        SigV4Auth(credentials.get_frozen_credentials(), str(auth["service"]),
                  str(auth.get("region") or default_region)).add_auth(request)
        return {name: value for name, value in request.headers.items()
                if name.lower() not in {h.lower() for h in headers}}
    return sign
