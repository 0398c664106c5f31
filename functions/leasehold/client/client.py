"""The Python client for application code: submit jobs, wait for their results, manage
schedules and workflows, over the REST API (locally, or behind API Gateway with SigV4)."""

from __future__ import annotations

import json
import os
import time
import urllib.parse
import uuid
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from leasehold.client.errors import ApiError, api_error
from leasehold.client.handle import MAX_WAIT_SECONDS, JobHandle
from leasehold.client.operations import Operations, segment, task_name
from leasehold.client.schedules import ScheduleOperations
from leasehold.client.transport import (
    MAX_RETRY_AFTER,
    REFUSED,
    UNSURE,
    HttpRetries,
    Transport,
    default_route,
    http,
    retry_after,
    sign,
    trace_headers,
    unsure,
)

DEFAULT_URL = "http://127.0.0.1:8080"
#: Jobs in one ``POST /jobs/batch`` (the API's limit); ``submit_many`` sends more in chunks.
BATCH_LIMIT = 100
#: Job fields ``submit`` passes through as the API names them.
JOB_OPTIONS = ("priority", "pool", "delay_seconds", "run_at", "idempotency_key",
               "max_attempts", "timeout_seconds", "retry", "labels", "deadline_seconds",
               "unique", "debounce", "start_within_seconds", "expires_at",
               "concurrency", "throttle")  # flow control (dicts as the API takes them)


class Client(ScheduleOperations, Operations):
    """``Client()`` talks to ``$LEASEHOLD_URL`` (default the local runtime's
    http://127.0.0.1:8080); in a test that runs ``leasehold.testing``'s fixture, to its
    in-process scheduler (:func:`~leasehold.client.set_default_transport`).

    ``tenant`` is the ``X-Leasehold-Tenant`` header the local runtime trusts (behind API
    Gateway the caller's identity decides); ``aws_auth=True`` signs every request with SigV4
    from the default credential chain (profile, SSO, environment, role) for an API that uses
    IAM auth. Requests refused with 429 or 503 are tried again after their ``Retry-After``;
    5xx answers and broken connections are tried again when the request is safe to repeat
    (reads, and submits, which carry an idempotency key unless ``idempotency_keys=False``).
    """

    def __init__(self, url: str | None = None, *, tenant: str | None = None,
                 aws_auth: bool = False, region: str | None = None, timeout: float = 30.0,
                 retries: HttpRetries | None = None, idempotency_keys: bool = True,
                 transport: Transport | None = None,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        route = default_route() if url is None and transport is None else None
        if route is not None:  # a test's in-process scheduler (leasehold.testing)
            url, transport = route
        self.url = (url or os.environ.get("LEASEHOLD_URL") or DEFAULT_URL).rstrip("/")
        self.tenant = tenant if tenant is not None else os.environ.get("LEASEHOLD_TENANT")
        self.aws_auth = aws_auth
        self.region = region
        self.timeout = timeout
        self.retries = retries or HttpRetries()
        self.idempotency_keys = idempotency_keys
        self.transport = transport or http
        #: How the client waits before trying again (a test may record the waits).
        self.sleep = sleep
        self._session: Any = None

    def __repr__(self) -> str:
        return f"Client({self.url!r}, tenant={self.tenant!r}, aws_auth={self.aws_auth})"

    # -- requests -------------------------------------------------------------------------

    def request(self, method: str, path: str, body: Any = None,
                query: Mapping[str, Any] | None = None, *, repeatable: bool | None = None,
                wait: float = 0.0, headers: Mapping[str, str] | None = None) -> Any:
        """One API call: the answer's JSON, or :class:`ApiError`. ``repeatable`` says whether
        a request that may have landed can be sent again (default: for GET and DELETE)."""
        return self.exchange(method, path, body, query, repeatable=repeatable, wait=wait,
                             headers=headers)[1]

    def exchange(self, method: str, path: str, body: Any = None,
                 query: Mapping[str, Any] | None = None, *, repeatable: bool | None = None,
                 wait: float = 0.0, headers: Mapping[str, str] | None = None
                 ) -> tuple[int, Any]:
        """As :meth:`request`, with the answer's status; ``headers`` go with every try.

        A ``421 misdirected`` answer (a cell that is not the tenant's home Region, see
        docs/regions.md) is followed once to the home's URL, which the client keeps for
        later requests (and, signing with SigV4, the home's Region)."""
        try:
            return self._exchange(method, path, body, query, repeatable=repeatable, wait=wait,
                                  headers=headers)
        except ApiError as error:
            home = error.home_url if error.status == 421 else None
            if not home or urllib.parse.urlsplit(home).scheme not in ("http", "https") or \
                    home.rstrip("/") == self.url:
                raise
            self.url = home.rstrip("/")
            if error.home and self.aws_auth:
                self.region = error.home
            return self._exchange(method, path, body, query, repeatable=repeatable,
                                  wait=wait, headers=headers)

    def _exchange(self, method: str, path: str, body: Any = None,
                  query: Mapping[str, Any] | None = None, *, repeatable: bool | None = None,
                  wait: float = 0.0, headers: Mapping[str, str] | None = None
                  ) -> tuple[int, Any]:
        extra = headers
        url = self.url + path
        if query:
            pairs = [(k, v) for k, vs in query.items() if vs is not None
                     for v in (vs if isinstance(vs, list | tuple) else [vs])]
            if pairs:
                url += "?" + "&".join(f"{k}={_quote(v)}" for k, v in pairs)
        data = None if body is None else json.dumps(body).encode()
        if repeatable is None:
            repeatable = method in ("GET", "HEAD", "DELETE")
        landed = False  # whether an earlier try may have landed
        for tries in range(self.retries.attempts):
            last = tries == self.retries.attempts - 1
            try:
                status, headers, raw = self.transport(
                    method, url, self._headers(method, url, data, extra), data,
                    self.timeout + wait)
            except OSError as exc:
                if repeatable and not last and unsure(exc):
                    landed = True
                    self.sleep(self.retries.backoff(tries, None))
                    continue
                reason = getattr(exc, "reason", exc)
                raise ApiError(0, "unreachable",
                               f"cannot reach the API at {self.url} ({reason}): is `leasehold "
                               "dev` running, and is the URL ($LEASEHOLD_URL, --url) right?"
                               ) from None
            if status < 400:
                return status, self._json(raw)
            hint = retry_after(_header(headers, "Retry-After"))
            again = status in REFUSED or (status in UNSURE and repeatable)
            if again and not last and (hint is None or hint <= MAX_RETRY_AFTER):
                landed = landed or status in UNSURE
                self.sleep(self.retries.backoff(tries, hint))
                continue
            error = _error(status, headers, raw)
            error.repeated = landed
            raise error
        raise AssertionError("unreachable")

    def _headers(self, method: str, url: str, data: bytes | None,
                 extra: Mapping[str, str] | None = None) -> dict[str, str]:
        # The caller's current OpenTelemetry span, as W3C headers: the jobs this request
        # makes continue its trace.
        headers = {"Accept": "application/json", **trace_headers(), **(extra or {})}
        if data is not None:
            headers["Content-Type"] = "application/json"
        if self.tenant:
            headers["X-Leasehold-Tenant"] = self.tenant
        if self.aws_auth:
            if self._session is None:
                import botocore.session

                self._session = botocore.session.get_session()
            headers = sign(method, url, data, headers, region=self.region,
                           session=self._session)
        return headers

    def _json(self, raw: bytes) -> Any:
        try:
            return json.loads(raw) if raw else None
        except ValueError:
            raise ApiError(0, "not_leasehold", f"{self.url} answered something that is not "
                                               "JSON: is it the Leasehold API?") from None

    # -- jobs -----------------------------------------------------------------------------

    def submit(self, task: Any, payload: Any = None, **options: Any) -> JobHandle:
        """Submit a job: ``task`` is its name or its ``@task`` function; ``options`` are the
        API's job fields (``priority``, ``pool``, ``delay_seconds``, ``run_at`` (a datetime
        or ISO text), ``idempotency_key``, ``max_attempts``, ``timeout_seconds``, ``retry``
        (a dict or :class:`~leasehold.RetryPolicy`), ``labels``; flow control: ``unique``
        (``{"key": ...}``), ``debounce`` (``{"key", "seconds", "max_wait_seconds"}``),
        ``start_within_seconds`` or ``expires_at`` (a datetime)).

        Without an ``idempotency_key`` a retry token is made up and sent as the
        ``Idempotency-Key`` header, so a submit retried after a lost answer makes one job,
        not two (``idempotency_keys=False`` turns that off). The API ignores the token for a
        debounced job (the submission's ``debounce`` or its task's): a repeat of a debounced
        submission joins the window that carried it, so it is safe to send again without.
        """
        return self._submit("submit", {"task": task_name(task), "payload": payload}, options)

    def submit_target(self, target: Mapping[str, Any], **options: Any) -> JobHandle:
        """Submit a job with no code: ``target`` is ``{"http": {"url", "method", "headers",
        "body", "timeout_seconds", "success", "auth", ...}}`` or ``{"aws": {"service",
        "action", "parameters"}}`` (README, "Jobs with no code"); ``options`` as
        :meth:`submit`'s. Its result is the response (status, chosen headers, body)."""
        return self._submit("submit_target", {"target": dict(target)}, options)

    def _submit(self, caller: str, body: dict[str, Any], options: Mapping[str, Any]
                ) -> JobHandle:
        unknown = set(options) - set(JOB_OPTIONS)
        if unknown:
            raise TypeError(f"{caller}() got unknown option(s) {sorted(unknown)}; "
                            f"it takes {', '.join(JOB_OPTIONS)}")
        for name, value in options.items():
            if value is None:
                continue
            if isinstance(value, datetime):
                if value.utcoffset() is None:
                    raise ValueError(f"{name} must be a timezone-aware datetime (a naive one "
                                     "names no instant): e.g. datetime.now(timezone.utc)")
                value = value.isoformat()
            elif hasattr(value, "to_dict"):
                value = {k: v for k, v in value.to_dict().items() if v is not None}
            body[name] = value
        # Not the body's idempotency_key: only the API knows whether the task debounces,
        # and a debounced job cannot take one (its window's job carries its identity).
        token = {"Idempotency-Key": f"client-{uuid.uuid4().hex}"} \
            if self.idempotency_keys and "idempotency_key" not in body else None
        status, job = self.exchange("POST", "/jobs", body, headers=token, repeatable=bool(
            token) or "idempotency_key" in body or "debounce" in body)
        return JobHandle(self, job["job_id"], job, created=status == 201)

    def submit_many(self, jobs: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """Submit many jobs through ``POST /jobs/batch``, 100 per request: one result per job,
        in order, as the API answers each item (``{"index", "status", "job" | "error",
        "retry_after"}``; ``status`` is 201 created, 200 an existing job answered, else the
        item's error). Each job is a ``POST /jobs`` body (``task`` may be a ``@task``
        function). A refused item never stops the others: check each ``status``.

        Each request carries a retry token (``Idempotency-Key``) unless
        ``idempotency_keys=False``, so a batch sent again after a lost answer makes each
        job once; a job's own ``idempotency_key`` wins for it."""
        bodies = [_job_body(job) for job in jobs]
        results: list[dict[str, Any]] = []
        for start in range(0, len(bodies), BATCH_LIMIT):
            chunk = bodies[start:start + BATCH_LIMIT]
            token = {"Idempotency-Key": f"client-{uuid.uuid4().hex}"} \
                if self.idempotency_keys else None
            answer = self.request("POST", "/jobs/batch", {"jobs": chunk}, headers=token,
                                  repeatable=bool(token) or all(
                                      "idempotency_key" in job or "debounce" in job
                                      for job in chunk))
            results += [{**result, "index": start + result["index"]}
                        for result in answer["results"]]
        return results

    def job(self, job_id: str) -> JobHandle:
        """A handle on a job submitted earlier (by id), to wait for its result."""
        return JobHandle(self, job_id, self.get(job_id))

    def get(self, job_id: str, *, wait_seconds: float = 0) -> dict[str, Any]:
        """The job. ``wait_seconds`` (up to 20; more is taken as 20) holds the answer until
        the job finishes or that time passes (a long poll)."""
        wait_seconds = min(wait_seconds, MAX_WAIT_SECONDS)
        query = {"wait_seconds": round(wait_seconds, 3)} if wait_seconds > 0 else None
        job: dict[str, Any] = self.request("GET", f"/jobs/{_id(job_id)}", query=query,
                                           wait=wait_seconds)
        return job

    def list(self, *, state: str | Sequence[str] | None = None, task: str | None = None,
             pool: str | None = None, schedule_id: str | None = None, limit: int = 50,
             cursor: str | None = None, code_version: str | None = None,
             patch: str | None = None,
             label: str | Sequence[str] | None = None) -> dict[str, Any]:
        """One page of your jobs, newest first: ``{"jobs": [...], "next_cursor": ...}``.
        ``code_version``: those first run by that code; ``patch``: the live durable jobs
        that may still take the old branch of ``ctx.patched(patch)``; ``label``: those that
        carry it, ``name:value`` (several: all of them)."""
        page: dict[str, Any] = self.request("GET", "/jobs", query={
            "state": state, "task": task, "pool": pool, "schedule_id": schedule_id,
            "limit": limit, "cursor": cursor, "code_version": code_version, "patch": patch,
            "label": label})
        return page

    def history(self, job_id: str) -> dict[str, Any]:
        """A durable job's history (``{"job", "records", "children"}``), as
        ``leasehold replay`` checks it."""
        document: dict[str, Any] = self.request("GET", f"/jobs/{_id(job_id)}/history")
        return document

    def cancel(self, job_id: str) -> dict[str, Any]:
        """Cancel the job (a running one stops at its next heartbeat)."""
        try:
            job: dict[str, Any] = self.request("DELETE", f"/jobs/{_id(job_id)}")
        except ApiError as exc:
            return self._cancelled_by_an_earlier_try(exc, self.get, job_id)
        return job

    def complete_callback(self, token: str, value: Any = None, *,
                          error: str | None = None) -> dict[str, Any]:
        """Complete a durable job's callback with ``value`` (or fail it with ``error``).
        Idempotent: a repeat answers ``"changed": false``, so it is safe to send again."""
        path = f"/callbacks/{urllib.parse.quote(token, safe=':')}" + (
            "/fail" if error is not None else "")
        body = {"error": error} if error is not None else value
        reply: dict[str, Any] = self.request("POST", path, body, repeatable=True)
        return reply

    def retry(self, job_id: str) -> JobHandle:
        """Run a DEAD or CANCELLED job again."""
        job = self.request("POST", f"/jobs/{_id(job_id)}/retry")
        return JobHandle(self, job["job_id"], job)

    # -- workflows ------------------------------------------------------------------------

    def submit_workflow(self, spec: Mapping[str, Any]) -> dict[str, Any]:
        """``POST /workflows``: the graph, checked whole before anything is written. Made
        idempotent (an ``idempotency_key`` is added unless given) so a retry starts one."""
        body = dict(spec)
        if self.idempotency_keys and "idempotency_key" not in body:
            body["idempotency_key"] = f"client-{uuid.uuid4().hex}"
        workflow: dict[str, Any] = self.request("POST", "/workflows", body,
                                                repeatable="idempotency_key" in body)
        return workflow

    def get_workflow(self, workflow_id: str) -> dict[str, Any]:
        workflow: dict[str, Any] = self.request("GET", f"/workflows/{_id(workflow_id)}")
        return workflow

    def list_workflows(self, *, state: str | None = None, limit: int = 50,
                       cursor: str | None = None) -> dict[str, Any]:
        page: dict[str, Any] = self.request("GET", "/workflows", query={
            "state": state, "limit": limit, "cursor": cursor})
        return page

    def cancel_workflow(self, workflow_id: str) -> dict[str, Any]:
        try:
            workflow: dict[str, Any] = self.request("DELETE", f"/workflows/{_id(workflow_id)}")
        except ApiError as exc:
            return self._cancelled_by_an_earlier_try(exc, self.get_workflow, workflow_id)
        return workflow

    def retry_workflow(self, workflow_id: str) -> dict[str, Any]:
        """Re-run a FAILED or CANCELLED workflow's failed and cancelled steps and all
        downstream (a 409 if it is not finished, or a retry already put it back running)."""
        workflow: dict[str, Any] = self.request("POST",
                                                f"/workflows/{_id(workflow_id)}/retry")
        return workflow

    @staticmethod
    def _cancelled_by_an_earlier_try(error: ApiError, read: Callable[[str], dict[str, Any]],
                                     item_id: str) -> dict[str, Any]:
        """A cancel sent again after a try whose answer was lost is refused as "already
        finished" (409) when that try cancelled it: then it is done, and its read is the
        answer. Any other refusal is raised as it came."""
        if error.repeated and error.status == 409:
            item = read(item_id)
            if item.get("state") == "CANCELLED":
                return item
        raise error


def _job_body(job: Mapping[str, Any]) -> dict[str, Any]:
    """A ``POST /jobs`` body from a job given to ``submit_many``: its ``task`` named, its
    datetimes as ISO text, a retry policy as a dict."""
    body: dict[str, Any] = {}
    for name, value in job.items():
        if name == "task":
            value = task_name(value)
        elif isinstance(value, datetime):
            if value.utcoffset() is None:
                raise ValueError(f"{name} must be a timezone-aware datetime")
            value = value.isoformat()
        elif hasattr(value, "to_dict"):
            value = {k: v for k, v in value.to_dict().items() if v is not None}
        body[name] = value
    return body


def _quote(value: Any) -> str:
    return urllib.parse.quote(str(value), safe="")


def _id(value: str) -> str:
    """An id as a path segment: quoted, so an id can never name another route."""
    return segment(value)


def _header(headers: Mapping[str, str], name: str) -> str | None:
    for key, value in headers.items():
        if key.lower() == name.lower():
            return value
    return None


def _error(status: int, headers: Mapping[str, str], raw: bytes) -> ApiError:
    text = raw.decode(errors="replace")
    try:
        error = json.loads(text)["error"]
        if not isinstance(error, dict):
            raise TypeError
    except (ValueError, KeyError, TypeError):
        error = {"code": "http_error", "message": text[:200] or f"HTTP {status}"}
    answer = api_error(status, error.get("code", "error"), error.get("message", ""),
                       error.get("field"), _header(headers, "Retry-After"))
    if status == 421:
        answer.home = error.get("home")
        answer.home_url = _header(headers, "Leasehold-Home-Url") or error.get("home_url")
    return answer
