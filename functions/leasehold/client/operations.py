"""The client's operating calls: flow-control keys and pools, dead letters, bulk actions and
figures, as the API serves them (``leasehold flow``, ``leasehold bulk`` and the console make
the same calls)."""

from __future__ import annotations

import urllib.parse
from collections.abc import Mapping
from typing import Any


class Operations:
    """Mixed into :class:`~leasehold.client.Client`; every call is one request."""

    def request(self, method: str, path: str, body: Any = None,
                query: Mapping[str, Any] | None = None, *, repeatable: bool | None = None,
                wait: float = 0.0) -> Any:
        raise NotImplementedError

    # -- flow control ---------------------------------------------------------------------

    def flow_keys(self) -> list[dict[str, Any]]:
        """Your concurrency keys: ``key``, ``in_use``, ``limit``, ``paused``, ``waiting``."""
        keys: list[dict[str, Any]] = self.request("GET", "/flow/keys")["keys"]
        return keys

    def flow_key(self, key: str) -> dict[str, Any]:
        return self._answer("GET", f"/flow/keys/{segment(key)}")

    def pause_key(self, key: str) -> dict[str, Any]:
        """No job with ``key`` starts until :meth:`resume_key`; running ones finish, waiting
        ones stay parked. Pausing twice is the same as once, so a lost answer is resent."""
        return self._answer("POST", f"/flow/keys/{segment(key)}/pause", repeatable=True)

    def resume_key(self, key: str) -> dict[str, Any]:
        return self._answer("POST", f"/flow/keys/{segment(key)}/resume", repeatable=True)

    def pause_pool(self, pool: str) -> dict[str, Any]:
        """Stop a pool's workers receiving (operators only; queued work waits)."""
        return self._answer("POST", f"/pools/{segment(pool)}/pause", repeatable=True)

    def resume_pool(self, pool: str) -> dict[str, Any]:
        return self._answer("POST", f"/pools/{segment(pool)}/resume", repeatable=True)

    # -- one job: pause, resume, reset ----------------------------------------------------

    def pause_job(self, job_id: str) -> dict[str, Any]:
        """The job does not start until :meth:`resume_job` (a running one finishes its
        attempt and is held before the next). Pausing twice is the same as once, so a lost
        answer is resent."""
        return self._answer("POST", f"/jobs/{segment(job_id)}/pause", repeatable=True)

    def resume_job(self, job_id: str) -> dict[str, Any]:
        return self._answer("POST", f"/jobs/{segment(job_id)}/resume", repeatable=True)

    def reset_job(self, job_id: str, from_step: str) -> dict[str, Any]:
        """Run a durable job again from its step ``from_step``: that step's record and the
        later ones are dropped, earlier steps keep their results (``POST
        /jobs/{id}/reset``)."""
        return self._answer("POST", f"/jobs/{segment(job_id)}/reset", {"from_step": from_step})

    # -- dead letters and bulk actions ----------------------------------------------------

    def dead_letters(self, *, pool: str | None = None, task: str | None = None,
                     limit: int = 50) -> list[dict[str, Any]]:
        """Your DEAD jobs, newest first."""
        page = self.request("GET", "/dead-letters",
                            query={"pool": pool, "task": task, "limit": limit})
        jobs: list[dict[str, Any]] = page["jobs"]
        return jobs

    def redrive(self, pool: str, *, task: str | None = None, limit: int | None = None
                ) -> dict[str, Any]:
        """Re-queue your DEAD jobs of ``pool``, each admitted like a submission."""
        body = {k: v for k, v in {"pool": pool, "task": task, "limit": limit}.items()
                if v is not None}
        return self._answer("POST", "/dead-letters/redrive", body)

    def bulk(self, action: str, *, dry_run: bool = False, **search: Any) -> dict[str, Any]:
        """``retry``, ``cancel``, ``redrive`` or ``delete`` every job a search matches (the
        search takes the fields of ``GET /jobs``: ``state``, ``task``, ``label`` ...). A dry
        run answers the count; otherwise the bulk job, to follow with :meth:`bulk_status`."""
        return self._answer("POST", "/jobs/bulk",
                            {"action": action, "dry_run": dry_run, "filter": search})

    def bulk_status(self, bulk_id: str) -> dict[str, Any]:
        return self._answer("GET", f"/jobs/bulk/{segment(bulk_id)}")

    # -- figures --------------------------------------------------------------------------

    def stats(self) -> dict[str, Any]:
        """Your jobs by state, queue depths and concurrency keys (``GET /stats``)."""
        return self._answer("GET", "/stats")

    def task_stats(self) -> dict[str, Any]:
        """Your tasks' outcomes and duration and queue-wait percentiles (``/stats/tasks``)."""
        return self._answer("GET", "/stats/tasks")

    def _answer(self, method: str, path: str, body: Any = None, *,
                repeatable: bool | None = None) -> dict[str, Any]:
        answer: dict[str, Any] = self.request(method, path, body, repeatable=repeatable)
        return answer


def segment(value: str) -> str:
    """One path segment: a key such as ``stripe:acct/1`` is sent whole, never as a path."""
    return urllib.parse.quote(value, safe="")


def task_name(task: Any) -> str:
    """A task's name from the name itself or from its ``@task``-decorated function."""
    if isinstance(task, str):
        return task
    name = getattr(task, "task_name", None)
    if not isinstance(name, str):
        raise TypeError(f"{task!r} is neither a task name nor a function decorated with @task")
    return name
