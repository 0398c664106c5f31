"""ECS task scale-in protection: a polling worker that runs jobs is not stopped by scale-in.

The ECS service scales in on its queues' depth, and scale-in stops whichever tasks it
picks, busy or not. A task protects itself through the ECS agent's endpoint
(``$ECS_AGENT_URI/task-protection/v1/state``, injected into every ECS task) while it has jobs
in flight, and drops the protection once idle. Protection expires by itself, so a worker
that dies protected blocks scale-in for at most ``expires_minutes``; a long-running worker
renews it before then.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
import urllib.request
from collections.abc import Callable, Mapping

log = logging.getLogger(__name__)

#: A PUT of a JSON body to a URL.
Put = Callable[[str, bytes], None]


def _put(url: str, body: bytes) -> None:
    request = urllib.request.Request(url, data=body, method="PUT",
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=5):
        pass


class TaskProtection:
    def __init__(self, agent_uri: str, *, expires_minutes: int = 30, put: Put = _put,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.url = agent_uri.rstrip("/") + "/task-protection/v1/state"
        self.expires_minutes = expires_minutes
        self._put = put
        self._clock = clock
        self._lock = threading.Lock()
        #: When the protection we set started (monotonic seconds); None: not protected.
        self._since: float | None = None

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> TaskProtection | None:
        """The task's protection when running on ECS (``ECS_AGENT_URI`` set), else None."""
        uri = (os.environ if env is None else env).get("ECS_AGENT_URI")
        return cls(uri) if uri else None

    @property
    def protected(self) -> bool:
        return self._since is not None

    def busy(self) -> None:
        """Jobs are in flight: protect the task, or renew a protection past half its life."""
        with self._lock:
            now = self._clock()
            if self._since is not None and now - self._since < self.expires_minutes * 30:
                return
            if self._send({"ProtectionEnabled": True,
                           "ExpiresInMinutes": self.expires_minutes}):
                self._since = now

    def idle(self) -> None:
        """No job in flight: let scale-in stop this task again."""
        with self._lock:
            if self._since is not None and self._send({"ProtectionEnabled": False}):
                self._since = None

    def _send(self, state: dict[str, object]) -> bool:
        try:
            self._put(self.url, json.dumps(state).encode())
        except Exception:  # the worker runs on; scale-in may stop it, the sweeper recovers
            log.warning("could not set task scale-in protection to %s", state, exc_info=True)
            return False
        return True


__all__ = ["TaskProtection"]
