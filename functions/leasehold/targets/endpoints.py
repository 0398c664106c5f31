"""HTTP targets and AWS: an AWS endpoint only where the deployment lists it, and ``sigv4``
only for a listed URL prefix and service.

A signed request is a credential: whoever chooses its URL and body chooses what it does. So
``auth.sigv4`` signs only a URL under one of the deployment's ``http_sigv4`` prefixes, for the
service listed with it (and its region, when listed). An AWS service endpoint (a host under
any partition's DNS suffixes as botocore lists them: ``amazonaws.com``, ``api.aws``,
``amazonaws.com.cn``, ...; and ``on.aws``, Lambda function URLs) is refused as an HTTP target
unless its URL is under a listed prefix or its host is in ``http_allow``: AWS APIs are called
with AWS targets, whose actions and resources are checked. The same rules hold on each
redirect hop (:func:`check_url` runs in :func:`leasehold.targets.http_spec.parse_url`), and
the signer checks the prefix again for each URL it signs.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

import botocore.loaders

from leasehold.errors import ValidationError

SETTING = "targets.http_sigv4"
#: Why a sigv4 or AWS target is refused where no targets role is configured: it would
#: otherwise run with the worker's own credentials, which reach Leasehold's tables.
NO_ROLE = ("this deployment has no targets role (LEASEHOLD_TARGETS_ROLE_ARN), so it signs "
           "nothing and calls no AWS action: the construct and `leasehold dev` configure one")
#: Hosts under these suffixes belong to AWS without being an API endpoint botocore lists:
#: Lambda function URLs (``<id>.lambda-url.<region>.on.aws``) take IAM auth.
EXTRA_SUFFIXES = ("on.aws",)


@dataclass(frozen=True)
class SignedPrefix:
    """One ``http_sigv4`` entry: URLs under ``url_prefix`` may be signed for ``service``."""

    url_prefix: str
    service: str
    region: str | None
    scheme: str
    host: str
    port: int
    path: str


def _port(parts: urllib.parse.SplitResult) -> int:
    return parts.port or (443 if parts.scheme.lower() == "https" else 80)


def parse_prefixes(raw: Any) -> tuple[SignedPrefix, ...]:
    if not isinstance(raw, Sequence) or isinstance(raw, str):
        raise ValidationError(SETTING, "must be a list of {url_prefix, service, region}")
    out = []
    for entry in raw:
        if not isinstance(entry, Mapping) or set(entry) - {"url_prefix", "service", "region"}:
            raise ValidationError(SETTING, f"an entry takes url_prefix, service and region: "
                                           f"{entry!r}")
        prefix, service, region = entry.get("url_prefix"), entry.get("service"), \
            entry.get("region")
        if not isinstance(service, str) or not service:
            raise ValidationError(SETTING, f"{prefix}: name the service it is signed for "
                                           "(execute-api, lambda, ...)")
        if region is not None and (not isinstance(region, str) or not region):
            raise ValidationError(SETTING, f"{prefix}: region must be a region name")
        parts = urllib.parse.urlsplit(prefix) if isinstance(prefix, str) else None
        if parts is None or parts.scheme.lower() not in ("http", "https") or \
                not parts.hostname or parts.query or parts.fragment or parts.username:
            raise ValidationError(SETTING, f"url_prefix must be an http(s) URL with a host "
                                           f"and a path, no query: {prefix!r}")
        if _dots(parts.path):
            raise ValidationError(SETTING, f"url_prefix has a . or .. segment: {prefix!r}")
        out.append(SignedPrefix(url_prefix=str(prefix), service=service, region=region,
                                scheme=parts.scheme.lower(),
                                host=parts.hostname.lower().rstrip("."), port=_port(parts),
                                path=parts.path or "/"))
    return tuple(out)


@cache
def aws_suffixes() -> tuple[str, ...]:
    """Every partition's DNS suffixes (botocore's partitions data), and :data:`EXTRA_SUFFIXES`."""
    data = botocore.loaders.Loader().load_data("partitions")
    found: list[str] = []
    for partition in data["partitions"]:
        outputs = partition.get("outputs", {})
        found += [outputs[key] for key in ("dnsSuffix", "dualStackDnsSuffix") if outputs.get(key)]
    return tuple(dict.fromkeys([*found, *EXTRA_SUFFIXES]))


def is_aws_endpoint(host: str) -> bool:
    name = host.lower().rstrip(".")
    return any(name == suffix or name.endswith("." + suffix) for suffix in aws_suffixes())


def _dots(path: str) -> bool:
    """Whether ``path`` has a ``.`` or ``..`` segment, percent-encoded or not: a server that
    normalizes it would serve a path outside the prefix that was checked."""
    decoded = urllib.parse.unquote(path).replace("\\", "/")
    return any(segment in (".", "..") for segment in decoded.split("/"))


def under(prefix: SignedPrefix, parts: urllib.parse.SplitResult) -> bool:
    """Whether the URL ``parts`` is under ``prefix``: the same scheme, host and port, and a
    path that is the prefix's or continues it segment by segment."""
    if parts.scheme.lower() != prefix.scheme or _port(parts) != prefix.port or \
            (parts.hostname or "").lower().rstrip(".") != prefix.host:
        return False
    path = parts.path or "/"
    if _dots(path):
        return False
    base = prefix.path if prefix.path.endswith("/") else prefix.path + "/"
    return path == base.rstrip("/") or path.startswith(base)


def signed_prefixes(prefixes: Sequence[SignedPrefix],
                    parts: urllib.parse.SplitResult) -> list[SignedPrefix]:
    return [prefix for prefix in prefixes if under(prefix, parts)]


def check_url(prefixes: Sequence[SignedPrefix], allow_hosts: frozenset[str],
              parts: urllib.parse.SplitResult, name: str) -> None:
    """Refuse (ValidationError naming ``name``) an AWS endpoint the deployment does not list."""
    host = (parts.hostname or "").lower().rstrip(".")
    if not is_aws_endpoint(host) or host in allow_hosts or signed_prefixes(prefixes, parts):
        return
    raise ValidationError(name, f"{host} is an AWS service endpoint: call AWS APIs with an "
                                "AWS target (target.aws), or have the deployment list this "
                                "URL in http_sigv4 or its host in http_allow")


def check_sigv4(prefixes: Sequence[SignedPrefix], parts: urllib.parse.SplitResult,
                service: str, region: str | None, name: str) -> str | None:
    """The region to sign for, or a ValidationError naming ``name`` when the deployment does
    not list this URL for ``service`` (and ``region``)."""
    found = signed_prefixes(prefixes, parts)
    if not found:
        listed = ", ".join(p.url_prefix for p in prefixes) or "none in this deployment"
        raise ValidationError(name, "signs only URLs under a prefix the deployment lists in "
                                    f"http_sigv4 (listed: {listed})")
    for prefix in found:
        if prefix.service == service and (prefix.region is None or region in (None,
                                                                             prefix.region)):
            return region or prefix.region
    allowed = ", ".join(sorted({f"{p.service}" + (f" in {p.region}" if p.region else "")
                                for p in found}))
    raise ValidationError(name, f"this URL may be signed only for {allowed}, not {service}"
                                + (f" in {region}" if region else ""))
