"""Fault injection at the botocore layer: every call still reaches the real service (moto).

Nothing here mocks a store. A fault hooks a client's botocore events, so the request is
really sent and really executed; only what the caller sees (or whether it is sent) changes:

* ``lose``: the call lands and its response is lost; botocore retries it, as after a
  connection reset, and the retry meets the write its first try made.
* ``lose-raise``: the call lands, its response is lost, and botocore's retry of it fails
  before it reaches the service: the caller sees an error although the write landed (as when
  every retry runs out).
* ``throttle``: the call is refused with a throttling error before it reaches the service;
  botocore backs off and retries (a fault with ``times`` >= the client's attempts outlasts
  the retries, and the caller sees the error).
* ``fail``: the call is refused before it reaches the service with an error botocore does
  not retry (what a caller sees once the retries of any error ran out).
* ``conflict``: the call is refused before it reaches the service as DynamoDB refuses a write
  that overlaps another transaction on one of its items: a ``TransactWriteItems`` is
  cancelled with ``TransactionConflict`` as every item's reason
  (``TransactionCanceledException``), any other call fails with
  ``TransactionConflictException``. botocore retries neither; neither emulator produces them.
* ``hang``: the call is sent to a real socket that accepts the connection and never answers
  (a half-open connection, a black-holed route): the caller waits on botocore's read
  timeout, and botocore retries the timed-out call (a fault with ``times=None`` hangs every
  try, so the caller waits out all of them). The call never reaches the service.
* ``refuse-entry``: a batch call (``sqs.SendMessageBatch``) is sent without its first entry,
  and its answer lists that entry under ``Failed`` as SQS answers an entry it refuses (the
  rest really land): the caller's per-entry fallback is what is tested.
* ``crash``: the process dies just before the call: in-process an :class:`InjectedCrash`, a
  ``BaseException`` that no ``except Exception`` swallows; with ``exit_on_crash`` the process
  really exits (the local runtime, whose supervisor restarts it).

The local runtime and its workers read ``LEASEHOLD_FAULTS`` (see :func:`parse`), e.g.
``dynamodb.UpdateItem:lose:0.05,dynamodb.*:throttle:0.02,sqs.SendMessage:lose:0.05``,
seeded by ``LEASEHOLD_FAULTS_SEED``, and install them on every client they build.
"""

from __future__ import annotations

import json
import logging
import os
import random
import socket
import threading
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any

from botocore.awsrequest import AWSResponse, HTTPHeaders

from leasehold.aws.isolation import MODES, switch_from
from leasehold.errors import ValidationError

log = logging.getLogger(__name__)

KINDS = ("lose", "lose-raise", "throttle", "fail", "conflict", "hang", "refuse-entry",
         "crash")
#: Marks the refusals this module makes up (never sent on the wire).
FAULT_HEADER = "x-leasehold-injected-fault"
#: Exit status of a process killed by a ``crash`` fault (the supervisor restarts it).
CRASH_EXIT_STATUS = 75


class InjectedCrash(BaseException):
    """The process died here (an injected fault)."""


@dataclass(kw_only=True)
class Fault:
    #: ``service.Operation``; ``*`` for any operation (``dynamodb.*``) or any call (``*``);
    #: several joined by ``|`` (``dynamodb.PutItem|dynamodb.UpdateItem``).
    target: str
    kind: str
    #: The chance that one matching call is hit.
    rate: float = 1.0
    #: How many calls to hit at most (None: no limit).
    times: int | None = 1
    #: Only calls whose parameters (the request's JSON body) satisfy this.
    when: Callable[[Mapping[str, Any]], bool] | None = None
    #: Only while this answers True (a Region isolated and brought back while the process
    #: runs: :mod:`leasehold.aws.isolation`).
    switch: Callable[[], bool] | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValidationError("faults", f"kind {self.kind!r} is not one of {KINDS}")
        if not 0 <= self.rate <= 1:
            raise ValidationError("faults", f"rate {self.rate} is not between 0 and 1")

    def matches(self, operation: str) -> bool:
        service, _, name = operation.partition(".")
        for target in self.target.split("|"):
            want_service, _, want_name = target.partition(".")
            if target == "*" or (want_service == service and want_name in ("*", name)):
                return True
        return False


class _Body:
    def __init__(self, data: bytes) -> None:
        self._data = data

    def stream(self, **_: Any) -> Iterator[bytes]:
        yield self._data


class _BlackHole:
    """A local TCP listener that accepts connections and never answers on them."""

    def __init__(self) -> None:
        self._server = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._server.getsockname()[1]}/"
        self._held: list[socket.socket] = []
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, name="fault-black-hole", daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                connection, _ = self._server.accept()
            except OSError:
                return  # closed
            with self._lock:
                self._held.append(connection)  # held open, never read nor answered

    @property
    def held(self) -> int:
        with self._lock:
            return len(self._held)

    def close(self) -> None:
        self._server.close()
        with self._lock:
            for connection in self._held:
                connection.close()
            self._held.clear()


def _operation(event_name: str) -> str:
    # "before-send.dynamodb.UpdateItem" -> "dynamodb.UpdateItem"
    parts = event_name.split(".")
    return f"{parts[1]}.{parts[2]}" if len(parts) >= 3 else event_name


def _bytes(body: Any) -> bytes:
    if isinstance(body, str):
        return body.encode()
    return bytes(body) if isinstance(body, bytes | bytearray) else b""


def _params(body: Any) -> Mapping[str, Any]:
    if isinstance(body, bytes | str) and body:
        try:
            value = json.loads(body)
        except ValueError:
            return {}
        return value if isinstance(value, dict) else {}
    return {}


class FaultInjector:
    """Injects :class:`Fault` s into the clients it is installed on; counts what it did."""

    def __init__(self, faults: list[Fault], *, seed: int | None = None,
                 exit_on_crash: bool = False, throttle_delay: float | None = None) -> None:
        self.faults = list(faults)
        self.exit_on_crash = exit_on_crash
        #: Seconds botocore waits before retrying an injected throttle (None: its own backoff,
        #: as on AWS; 0 keeps long randomised test runs fast and deterministic).
        self.throttle_delay = throttle_delay
        self.injected: Counter[tuple[str, str]] = Counter()
        self._uses: dict[int, int] = {}  # per fault (by identity): calls it hit
        #: Requests (operation, body) that landed under ``lose-raise``: their retry fails.
        self._lost: set[tuple[str, bytes]] = set()
        #: The entry a ``refuse-entry`` fault took out of this thread's call in flight.
        self._refused = threading.local()
        #: After a crash the process is dead: in-process, every later call dies too, so no
        #: ``finally`` block can write what a killed process never would.
        self.dead = False
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self._black_hole: _BlackHole | None = None

    def install(self, client: Any) -> Any:
        events = client.meta.events
        # First, so that they run before moto's in-process stubber answers the request.
        events.register_first("before-send", self._before_send)
        # A client that never retries (``Clients.client(once=True)``) cannot meet its own
        # landed write again: a lost response is an error its caller sees (``lose-raise``).
        retries = client.meta.config.retries or {}
        once = retries.get("total_max_attempts") == 1
        events.register_first("needs-retry", partial(self._needs_retry, once=once))
        events.register("after-call", self._after_call)
        return client

    def _hit(self, kinds: tuple[str, ...], operation: str, body: Any) -> Fault | None:
        with self._lock:
            for fault in self.faults:
                if fault.kind not in kinds or not fault.matches(operation):
                    continue
                if fault.times is not None and self._uses.get(id(fault), 0) >= fault.times:
                    continue
                if fault.when is not None and not fault.when(_params(body)):
                    continue
                if fault.switch is not None and not fault.switch():
                    continue
                if fault.rate < 1 and self._rng.random() >= fault.rate:
                    continue
                self._uses[id(fault)] = self._uses.get(id(fault), 0) + 1
                self.injected[(operation, fault.kind)] += 1
                log.warning("injected fault: %s on %s", fault.kind, operation)
                return fault
        return None

    # -- botocore handlers ---------------------------------------------------------------

    @property
    def hanging(self) -> int:
        """Connections a ``hang`` fault sent to the black hole that it still holds open."""
        return self._black_hole.held if self._black_hole is not None else 0

    def close(self) -> None:
        """Stop hanging calls: the black hole closes every connection it holds (a caller
        still waiting sees the connection dropped, and botocore retries it) and no later call
        is hung."""
        with self._lock:
            self.faults = [fault for fault in self.faults if fault.kind != "hang"]
            black_hole, self._black_hole = self._black_hole, None
        if black_hole is not None:
            black_hole.close()

    def _black_hole_url(self) -> str:
        with self._lock:
            if self._black_hole is None:
                self._black_hole = _BlackHole()
            return self._black_hole.url

    def revive(self) -> None:
        """The process restarted (in-process tests): calls go through again."""
        self.dead = False

    def _before_send(self, request: Any, event_name: str, **_: Any) -> AWSResponse | None:
        operation = _operation(event_name)
        if self.dead:
            raise InjectedCrash(operation)
        retried = (operation, _bytes(request.body))
        with self._lock:
            lost = retried in self._lost
            self._lost.discard(retried)
        if lost:  # the retry of a call that landed under lose-raise fails too
            return self._refusal(request, operation, "lose-raise", "InjectedFailure")
        if operation == "sqs.SendMessageBatch" and \
                self._hit(("refuse-entry",), operation, request.body) is not None:
            self._refuse_first_entry(request)
        fault = self._hit(("throttle", "fail", "conflict", "hang", "crash"), operation,
                          request.body)
        if fault is None:
            return None
        if fault.kind == "hang":
            # Really sent, to a socket that never answers: botocore's own read timeout and
            # retries decide how long the caller waits (moto's in-process stubber serves only
            # AWS hosts, so it lets this request through to the wire).
            request.url = self._black_hole_url()
            return None
        if fault.kind == "crash":
            log.warning("injected fault: process dies before %s", operation)
            if self.exit_on_crash:
                os._exit(CRASH_EXIT_STATUS)
            self.dead = True
            raise InjectedCrash(operation)
        if fault.kind == "conflict":
            return self._conflict(request, operation)
        code = "ThrottlingException" if fault.kind == "throttle" else "InjectedFailure"
        return self._refusal(request, operation, fault.kind, code)

    def _refuse_first_entry(self, request: Any) -> None:
        params = dict(_params(request.body))
        entries = list(params.get("Entries") or [])
        if len(entries) < 2:
            return  # SQS refuses a batch with no entry: keep the call as it was
        refused, params["Entries"] = entries[0], entries[1:]
        body = json.dumps(params).encode()
        request.body = body
        request.headers["Content-Length"] = str(len(body))
        self._refused.refused = refused["Id"]

    def _after_call(self, parsed: Any, event_name: str, **_: Any) -> None:
        refused = getattr(self._refused, "refused", None)
        if refused is None or _operation(event_name) != "sqs.SendMessageBatch":
            return
        self._refused.refused = None
        parsed.setdefault("Failed", []).append(
            {"Id": refused, "SenderFault": False, "Code": "InternalError",
             "Message": "injected refuse-entry"})

    @classmethod
    def _conflict(cls, request: Any, operation: str) -> AWSResponse:
        if operation != "dynamodb.TransactWriteItems":
            return cls._refusal(request, operation, "conflict", "TransactionConflictException")
        items = _params(request.body).get("TransactItems") or []
        reasons = [{"Code": "TransactionConflict",
                    "Message": "Transaction is ongoing for the item"} for _ in items]
        return cls._refusal(request, operation, "conflict", "TransactionCanceledException",
                            {"CancellationReasons": reasons})

    @staticmethod
    def _refusal(request: Any, operation: str, kind: str, code: str,
                 extra: Mapping[str, Any] | None = None) -> AWSResponse:
        # Every before-send handler runs, and moto's in-process stubber would still execute
        # the request: point it at a host no backend serves, so the call really never lands.
        request.url = "https://fault-injected.invalid/"
        body = {"__type": code, "message": f"injected {kind} on {operation}", **(extra or {})}
        headers = HTTPHeaders()
        headers[FAULT_HEADER] = kind
        return AWSResponse(request.url, 400, headers, _Body(json.dumps(body).encode()))

    def _needs_retry(self, response: Any, request_dict: Mapping[str, Any], event_name: str,
                     caught_exception: Any = None, *, once: bool = False,
                     **_: Any) -> float | None:
        if caught_exception is not None or response is None:
            return None
        http_response, _parsed = response
        if http_response.status_code >= 300:
            injected = http_response.headers.get(FAULT_HEADER)
            return self.throttle_delay if injected == "throttle" else None
        operation, body = _operation(event_name), request_dict.get("body")
        fault = self._hit(("lose", "lose-raise"), operation, body)
        if fault is None:
            return None
        if fault.kind == "lose-raise" or once:
            with self._lock:
                self._lost.add((operation, _bytes(body)))
        return 0  # retry at once: the write landed, the caller never saw that it did


#: ``LEASEHOLD_FAULTS=isolate`` (or ``isolate:hang``): the process's Region is off, every AWS
#: call it makes refused (or hanging), its cell's control-table calls included
#: (``leasehold.cells``): the cell fences itself within its Region lease (docs/regions.md).
ISOLATE = "isolate"


def isolates(spec: str) -> bool:
    """Whether ``spec`` (a ``LEASEHOLD_FAULTS`` value) takes the whole Region off."""
    return any(part.strip().split(":")[0] == ISOLATE for part in spec.split(","))


def parse(spec: str) -> list[Fault]:
    """Faults from ``service.Operation:kind[:rate][:xTIMES]`` entries, comma separated;
    ``isolate[:fail|hang]`` is every call of the process, failing (or hanging), for good.

    Without ``xTIMES`` an environment fault has no limit (it is a rate over the whole run).
    """
    faults = []
    for entry in filter(None, (part.strip() for part in spec.split(","))):
        parts = entry.split(":")
        if parts[0] == ISOLATE:
            kind = parts[1] if len(parts) > 1 else "fail"
            if len(parts) > 2 or kind not in ("fail", "hang"):
                raise ValidationError("LEASEHOLD_FAULTS",
                                      f"{entry!r}: isolate takes fail or hang, nothing else")
            faults.append(Fault(target="*", kind=kind, times=None))
            continue
        if len(parts) < 2:
            raise ValidationError("LEASEHOLD_FAULTS", f"{entry!r} is not target:kind[:rate]")
        rate, times = 1.0, None
        for extra in parts[2:]:
            try:
                if extra.startswith("x"):
                    times = int(extra[1:])
                else:
                    rate = float(extra)
            except ValueError:
                raise ValidationError("LEASEHOLD_FAULTS",
                                      f"{extra!r} in {entry!r} is not a rate or xTIMES") from None
        faults.append(Fault(target=parts[0], kind=parts[1], rate=rate, times=times))
    return faults


def switched(env: Mapping[str, str]) -> list[Fault]:
    """``LEASEHOLD_ISOLATE_FILE`` (``leasehold regions isolate``): every call refused while
    the file says ``fail``, hung while it says ``hang``; none when it is unset."""
    switch = switch_from(env)
    if switch is None:
        return []
    return [Fault(target="*", kind=mode, times=None,
                  switch=lambda mode=mode: switch.mode() == mode)  # type: ignore[misc]
            for mode in MODES]


def from_env(env: Mapping[str, str] | None = None) -> FaultInjector | None:
    """The injector ``LEASEHOLD_FAULTS`` (and ``LEASEHOLD_ISOLATE_FILE``) ask for (None when
    neither is set): processes exit on crash."""
    env = os.environ if env is None else env
    spec = env.get("LEASEHOLD_FAULTS", "").strip()
    faults = [*parse(spec), *switched(env)]
    if not faults:
        return None
    seed = env.get("LEASEHOLD_FAULTS_SEED")
    return FaultInjector(faults, seed=None if seed is None else int(seed) + os.getpid(),
                         exit_on_crash=True)
