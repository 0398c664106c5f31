"""Credentials of their own: outbound calls run under the targets role, never the worker's.

The worker's role reads and writes Leasehold's tables and queues; a tenant's call must not
carry that power, even if a check before it were missed. So a ``sigv4`` signature, an AWS
target's client and the reading of ``http_secrets`` use credentials from STS ``AssumeRole``
on the deployment's targets role (``Settings.targets_role_arn``), which holds only the
target grants and the secrets' reads (``leasehold.cdk.targets``). Each job assumes it
with a session name carrying its tenant and id (so CloudTrail shows whose call it was) and a
session policy narrowing the session to the one action and resource the call names, with
Leasehold's own resources denied outright. Credentials are cached per (session name, policy)
until :data:`REFRESH_SECONDS` before they expire: a job's retries and redirect hops reuse
them; another job assumes anew (one STS call per target job: STS throttles an account's
rate, and a throttled AssumeRole fails the attempt, retried under the job's policy). Without
a role nothing is signed or called (:class:`NoTargetsRole`): there is no fall-back to the
worker's credentials.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import boto3
from botocore.config import Config
from botocore.credentials import ReadOnlyCredentials

from leasehold.aws.clients import Clients
from leasehold.errors import NonRetryableError
from leasehold.targets.endpoints import NO_ROLE
from leasehold.targets.failures import TargetFailed

#: The shortest session STS grants; a call runs at most 900 s, and a new job assumes anew.
DURATION_SECONDS = 900
#: Cached credentials are used while they have at least this long left.
REFRESH_SECONDS = 120
#: Sessions kept at once (jobs in flight in one worker, and their retries).
MAX_SESSIONS = 256
#: STS's RoleSessionName: 2 to 64 of ``[\w+=,.@-]``.
SESSION_NAME_CHARS = re.compile(r"[^\w+=,.@-]")
SESSION_NAME_LIMIT = 64
#: STS refuses a session policy longer than this (plain text); the ``Deny`` of Leasehold's
#: own resources must leave room for the ``Allow`` (checked at synth:
#: :func:`check_policy_room`).
MAX_POLICY_CHARS = 2048
DENY_ROOM_CHARS = 1536
#: Target calls retry under the job's policy: botocore adds only a few quick ones.
_CONFIG = Config(retries={"mode": "standard", "max_attempts": 3}, connect_timeout=5,
                 read_timeout=60)


class NoTargetsRole(TargetFailed, NonRetryableError):
    """No targets role is configured: nothing is signed and no AWS action is called."""

    code = "no_targets_role"


class RoleUnavailable(TargetFailed):
    """The targets role could not be assumed (retried under the job's policy)."""


@dataclass(frozen=True)
class Who:
    """Whose call it is, for the session name."""

    tenant: str
    job_id: str


def session_name(who: Who | None) -> str:
    """``lh.<tenant>@<job id>`` in STS's charset and length (the job id kept whole when it
    can be, the tenant shortened first)."""
    if who is None:
        return "leasehold-secrets"
    job = SESSION_NAME_CHARS.sub("-", who.job_id)[:SESSION_NAME_LIMIT - 5]
    tenant = SESSION_NAME_CHARS.sub("-", who.tenant)[:max(0, SESSION_NAME_LIMIT - 4 - len(job))]
    return f"lh.{tenant}@{job}"[:SESSION_NAME_LIMIT]


def policy(allow: Sequence[tuple[str, Sequence[str]]], deny: Sequence[str]) -> str:
    """A session policy: each (action, resources) allowed, everything on ``deny`` denied."""
    statements: list[dict[str, Any]] = [
        {"Effect": "Allow", "Action": action, "Resource": list(resources)}
        for action, resources in allow]
    if deny:
        statements.append({"Effect": "Deny", "Action": "*", "Resource": list(deny)})
    return json.dumps({"Version": "2012-10-17", "Statement": statements},
                      separators=(",", ":"))


def check_policy_room(own: Sequence[str]) -> None:
    """Raise ValueError when Leasehold's own resources take too much of a session policy
    (too many ``http_secrets``, or very long names)."""
    size = len(policy([], own))
    if size > DENY_ROOM_CHARS:
        raise ValueError(f"the session policy denying Leasehold's own resources takes {size} "
                         f"of STS's {MAX_POLICY_CHARS} characters (at most {DENY_ROOM_CHARS}): "
                         "name fewer http_secrets, or shorter ones")


@dataclass(frozen=True)
class _Held:
    credentials: ReadOnlyCredentials
    expires: float


class TargetCredentials:
    """The targets role's credentials, assumed by the worker with its own."""

    def __init__(self, role_arn: str | None, clients: Clients, *,
                 now: Callable[[], float] = time.time) -> None:
        self.role_arn = role_arn
        self._clients = clients
        self.settings = clients.settings
        self.faults = clients.faults
        self._now = now
        self._held: dict[tuple[str, str | None], _Held] = {}
        self._lock = threading.Lock()
        self._session = boto3.session.Session()
        self._built: dict[tuple[str, str | None], Any] = {}

    def get(self, who: Who | None, session_policy: str | None) -> ReadOnlyCredentials:
        """Credentials of the role for ``who`` under ``session_policy`` (cached)."""
        if self.role_arn is None:
            raise NoTargetsRole(NO_ROLE)
        key = (session_name(who), session_policy)
        with self._lock:
            held = self._held.get(key)
            if held is not None and held.expires - self._now() > REFRESH_SECONDS:
                return held.credentials
        args: dict[str, Any] = {"RoleArn": self.role_arn, "RoleSessionName": key[0],
                                "DurationSeconds": DURATION_SECONDS}
        if session_policy is not None:
            args["Policy"] = session_policy
        try:
            answer = self._clients.client("sts").assume_role(**args)["Credentials"]
        except Exception as exc:
            raise RoleUnavailable(f"the targets role could not be assumed: "
                                  f"{type(exc).__name__}: {exc}") from None
        credentials = ReadOnlyCredentials(answer["AccessKeyId"], answer["SecretAccessKey"],
                                          answer["SessionToken"])
        with self._lock:
            now = self._now()
            for old in [k for k, v in self._held.items() if v.expires - now <= REFRESH_SECONDS]:
                del self._held[old]
            if len(self._held) >= MAX_SESSIONS:
                self._held.pop(next(iter(self._held)))
            self._held[key] = _Held(credentials, answer["Expiration"].timestamp())
        return credentials

    def client(self, service: str, credentials: ReadOnlyCredentials) -> Any:
        """A client of ``service`` with ``credentials``, at the endpoint and region the
        application's own clients use (the emulator, locally); kept while they are."""
        settings = self._clients.settings
        key = (service, credentials.access_key)
        with self._lock:  # a boto3 session is not safe to build clients from at once
            if key in self._built:
                return self._built[key]
            client = self._session.client(
                service,  # type: ignore[call-overload]
                region_name=settings.region, endpoint_url=settings.endpoint_url,
                aws_access_key_id=credentials.access_key,
                aws_secret_access_key=credentials.secret_key,
                aws_session_token=credentials.token, config=_CONFIG)
            if self._clients.faults is not None:
                self._clients.faults.install(client)
            if len(self._built) >= MAX_SESSIONS:
                self._built.pop(next(iter(self._built)))
            self._built[key] = client
        return client


class RoleClients(Clients):
    """The clients :class:`leasehold.aws.secrets.SecretsLoader` reads ``http_secrets``
    through: under the targets role (session ``leasehold-secrets``, allowed to read secrets
    only), each call made with credentials that are current (a loader keeps its client)."""

    ACTIONS = ("secretsmanager:GetSecretValue", "ssm:GetParameter", "kms:Decrypt")

    def __init__(self, credentials: TargetCredentials) -> None:
        super().__init__(credentials.settings, faults=credentials.faults)
        self._credentials = credentials
        self._policy = policy([(action, ["*"]) for action in self.ACTIONS], ())

    def client(self, service: str, *, once: bool = False) -> Any:
        return _Fresh(self, service)  # the targets role's calls: retried as botocore does

    def current(self, service: str) -> Any:
        creds = self._credentials.get(None, self._policy)
        return self._credentials.client(service, creds)


class _Fresh:
    """A client whose every call is made by a client with the current credentials."""

    def __init__(self, owner: RoleClients, service: str) -> None:
        self._owner = owner
        self._service = service

    def __getattr__(self, name: str) -> Any:
        return getattr(self._owner.current(self._service), name)
