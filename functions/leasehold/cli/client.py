"""The CLI's options for reaching the API, and the client it reaches it with: application
code's :class:`leasehold.client.Client`, built from ``--url``, ``--tenant`` and
``--aws-auth``."""

from __future__ import annotations

import argparse
import os

from leasehold.client import ApiError
from leasehold.client import Client as _Client
from leasehold.client.client import DEFAULT_URL
from leasehold.client.transport import region_of, sign

__all__ = ["DEFAULT_URL", "ApiError", "Client", "add_client_options", "region_of", "sign"]


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


class Client(_Client):
    @classmethod
    def from_args(cls, args: argparse.Namespace) -> Client:
        return cls(args.url, tenant=args.tenant, aws_auth=args.aws_auth)
