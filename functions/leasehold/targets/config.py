"""What a deployment allows jobs with no code to do, read once from ``Settings.targets``.

``LeaseholdConfig`` (CDK) writes it into every function's ``LEASEHOLD_TARGETS``; the local
runtime builds it from its flags. Every field is optional:

- ``http_allow``: hosts (``"hooks.internal.example"``) or networks (``"10.1.0.0/16"``) an
  HTTP target may reach although the address rules refuse them (:mod:`.addresses`).
- ``http_hosts``: per-host flow control, ``{"api.partner.example": {"concurrency": 4,
  "rate_per_second": 10}}``; ``"*"`` sets the default of every other host.
- ``http_secrets``: the secrets a ``secret_header`` may name, each bound to the origins it
  may be sent to and, optionally, the tenants that may use it: ``{"partner-api-key":
  {"secret": "secretsmanager:<name or ARN>", "origins": ["https://api.partner.example"],
  "tenants": ["acme"]}}`` (``"ssm:<parameter name>"`` for a parameter). The older string
  form bound a secret to nothing and is refused with a message saying how to write it.
- ``aws_targets``: the AWS actions an AWS target may call, ``[{"action": "sns:Publish",
  "resources": ["arn:..."]}]``.
- ``http_sigv4``: the URLs ``auth.sigv4`` may sign, ``[{"url_prefix": "https://abc.execute-api.
  us-east-1.amazonaws.com/prod/", "service": "execute-api"}]`` (:mod:`.endpoints`).
- ``redact_headers``: header names never shown (default Authorization, Cookie, X-Api-Key).
"""

from __future__ import annotations

import ipaddress
import re
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from leasehold.aws.definitions import TABLES
from leasehold.errors import ValidationError
from leasehold.settings import Settings
from leasehold.targets.endpoints import SignedPrefix, parse_prefixes
from leasehold.targets.resources import Own, Place

Network = ipaddress.IPv4Network | ipaddress.IPv6Network

DEFAULT_REDACT = ("authorization", "cookie", "x-api-key", "proxy-authorization", "set-cookie")
#: A host with no ``http_hosts`` entry (nor ``"*"``) runs at most this many calls at once
#: per tenant: per-host flow control is on by default, never unbounded.
DEFAULT_HOST_CONCURRENCY = 10
LOOPBACK: tuple[Network, ...] = (ipaddress.ip_network("127.0.0.0/8"),
                                 ipaddress.ip_network("::1/128"))
_ACTION = re.compile(r"^[a-z0-9-]+:[A-Za-z0-9]+$")


@dataclass(frozen=True)
class HostLimits:
    concurrency: int = DEFAULT_HOST_CONCURRENCY
    rate_per_second: float | None = None


@dataclass(frozen=True)
class AwsGrant:
    """``service:Action`` on ``resources`` (IAM ARNs; ``["*"]`` for actions without one)."""

    action: str
    resources: tuple[str, ...]


@dataclass(frozen=True)
class SecretScope:
    """Where a secret may be sent (normalized origins, :func:`origin`) and who may use it
    (None: every tenant)."""

    origins: frozenset[str]
    tenants: frozenset[str] | None = None


def origin(url: str | urllib.parse.SplitResult) -> str:
    """``scheme://host:port`` of a URL, the port always written (the scheme's default when the
    URL has none) and the host lower-cased: two spellings of one origin compare equal."""
    parts = urllib.parse.urlsplit(url) if isinstance(url, str) else url
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https") or not parts.hostname:
        raise ValueError("not an http(s) URL with a host")
    port = parts.port or (443 if scheme == "https" else 80)
    host = parts.hostname.lower().rstrip(".")
    return f"{scheme}://{f'[{host}]' if ':' in host else host}:{port}"


@dataclass(frozen=True, kw_only=True)
class TargetConfig:
    allow_hosts: frozenset[str] = frozenset()
    allow_networks: tuple[Network, ...] = ()
    hosts: Mapping[str, HostLimits] = field(default_factory=dict)
    secrets: Mapping[str, str] = field(default_factory=dict)
    #: Each secret's origins and tenants (the same names as ``secrets``).
    secret_scopes: Mapping[str, SecretScope] = field(default_factory=dict)
    aws: tuple[AwsGrant, ...] = ()
    redact: frozenset[str] = frozenset(DEFAULT_REDACT)
    sigv4: tuple[SignedPrefix, ...] = ()
    #: The targets role (``Settings.targets_role_arn``); None: no sigv4 or AWS target runs.
    role_arn: str | None = None
    #: Leasehold's own resources (never an AWS target's), and where names without an ARN are.
    own: Own = field(default_factory=Own)
    place: Place = field(default_factory=Place)

    def limits(self, *names: str) -> HostLimits:
        """The limits of the first of ``names`` listed (``host:port``, then ``host``), else
        the ``"*"`` entry's, else the default."""
        for name in (*names, "*"):
            if name in self.hosts:
                return self.hosts[name]
        return HostLimits()

    def allows_action(self, action: str) -> bool:
        return any(grant.action == action for grant in self.aws)

    @classmethod
    def from_settings(cls, settings: Settings) -> TargetConfig:
        parsed = cls.parse(settings.targets)
        own = Own.of(tables=tuple(table.table_name(settings) for table in TABLES),
                     queue_prefix=settings.queue_prefix,
                     queue_urls=tuple(settings.queue_urls.values()), bus=settings.event_bus,
                     secrets=tuple(parsed.secrets.values()))
        return replace(parsed, role_arn=settings.targets_role_arn, own=own,
                       place=Place.of(settings.targets_role_arn, settings.region))

    @classmethod
    def parse(cls, raw: Mapping[str, Any]) -> TargetConfig:
        known = {"http_allow", "http_hosts", "http_secrets", "aws_targets", "redact_headers",
                 "http_sigv4"}
        unknown = set(raw) - known
        if unknown:
            raise ValidationError("targets", f"unknown setting(s) {sorted(unknown)}; known: "
                                             f"{', '.join(sorted(known))}")
        hosts, networks = set(), []
        for entry in raw.get("http_allow", ()):
            if not isinstance(entry, str) or not entry:
                raise ValidationError("targets.http_allow", f"not a host or network: {entry!r}")
            try:
                networks.append(ipaddress.ip_network(entry, strict=False))
            except ValueError:
                hosts.add(entry.lower().rstrip("."))
        limits = {}
        for host, value in dict(raw.get("http_hosts", {})).items():
            unknown = set(value) - {"concurrency", "rate_per_second"}
            if unknown:
                raise ValidationError(f"targets.http_hosts.{host}",
                                      f"unknown field(s) {sorted(unknown)}")
            limits[host.lower()] = HostLimits(
                concurrency=int(value.get("concurrency", DEFAULT_HOST_CONCURRENCY)),
                rate_per_second=(None if value.get("rate_per_second") is None
                                 else float(value["rate_per_second"])))
        secrets, scopes = {}, {}
        for name, entry in dict(raw.get("http_secrets", {})).items():
            secrets[name], scopes[name] = _secret(str(name), entry)
        grants = []
        for entry in raw.get("aws_targets", ()):
            action = entry.get("action") if isinstance(entry, Mapping) else None
            if not isinstance(action, str) or not _ACTION.match(action):
                raise ValidationError("targets.aws_targets",
                                      f"an entry needs an action as 'sns:Publish': {entry!r}")
            resources = tuple(entry.get("resources") or ())
            if not resources:
                raise ValidationError("targets.aws_targets", f"{action}: list its resources "
                                      "(ARNs, or ['*'] for an action that takes none)")
            grants.append(AwsGrant(action, resources))
        redact = raw.get("redact_headers")
        return cls(
            allow_hosts=frozenset(hosts), allow_networks=tuple(networks), hosts=limits,
            secrets=secrets, secret_scopes=scopes, aws=tuple(grants),
            sigv4=parse_prefixes(raw.get("http_sigv4", ())),
            redact=frozenset(DEFAULT_REDACT) if redact is None else
            frozenset(str(name).lower() for name in redact))


def _secret(name: str, entry: Any) -> tuple[str, SecretScope]:
    """One ``http_secrets`` entry: where its value is read, and where it may be sent."""
    field_name = f"targets.http_secrets.{name}"
    example = (f'{{"{name}": {{"secret": "secretsmanager:<name or ARN>", '
               '"origins": ["https://api.partner.example"]}}')
    if isinstance(entry, str):
        raise ValidationError(field_name, "must name the origins the secret may be sent to, "
                                          f"as {example} (optionally \"tenants\": [...]); a "
                                          "secret bound to no origin could go to any host")
    if not isinstance(entry, Mapping):
        raise ValidationError(field_name, f"must be an object, as {example}")
    unknown = set(entry) - {"secret", "origins", "tenants"}
    if unknown:
        raise ValidationError(field_name, f"unknown field(s) {sorted(unknown)}")
    where = entry.get("secret")
    if not isinstance(where, str) or not where.startswith(("secretsmanager:", "ssm:")):
        raise ValidationError(f"{field_name}.secret", "must be 'secretsmanager:<name or ARN>' "
                                                      "or 'ssm:<parameter name>'")
    origins = entry.get("origins")
    if not isinstance(origins, list | tuple) or not origins:
        raise ValidationError(f"{field_name}.origins", "must list the origins the secret may "
                                                       "be sent to (https://host[:port])")
    bound = set()
    for text in origins:
        parts = urllib.parse.urlsplit(text) if isinstance(text, str) else None
        try:
            if parts is None or parts.path not in ("", "/") or parts.query or \
                    parts.fragment or parts.username is not None or parts.password is not None:
                raise ValueError("not an origin")
            bound.add(origin(parts))
        except ValueError:
            raise ValidationError(f"{field_name}.origins", f"not an origin "
                                  f"(scheme://host[:port], nothing more): {text!r}") from None
    tenants = entry.get("tenants")
    if tenants is not None and (not isinstance(tenants, list | tuple) or not tenants or
                                not all(isinstance(t, str) and t for t in tenants)):
        raise ValidationError(f"{field_name}.tenants", "must list tenant names (leave it out "
                                                       "for every tenant)")
    return where, SecretScope(frozenset(bound),
                              None if tenants is None else frozenset(tenants))
