"""``AsyncClient``: the same client for asyncio code. Each call runs the blocking client in a
worker thread (``asyncio.to_thread``), so a long poll never blocks the event loop."""

from __future__ import annotations

import asyncio
from typing import Any

from leasehold.client.client import Client
from leasehold.client.handle import JobHandle


class AsyncJobHandle:
    def __init__(self, handle: JobHandle) -> None:
        self.sync = handle
        self.job_id = handle.job_id

    @property
    def job(self) -> dict[str, Any]:
        return self.sync.job

    async def status(self) -> str:
        return await asyncio.to_thread(self.sync.status)

    async def result(self, timeout: float | None = None) -> Any:
        """As :meth:`JobHandle.result`, its long polls in a worker thread (a cancelled await
        leaves that thread to finish its current poll, at most 20 s)."""
        return await asyncio.to_thread(self.sync.result, timeout)

    async def cancel(self) -> dict[str, Any]:
        return await asyncio.to_thread(self.sync.cancel)

    async def pause(self) -> dict[str, Any]:
        return await asyncio.to_thread(self.sync.pause)

    async def resume(self) -> dict[str, Any]:
        return await asyncio.to_thread(self.sync.resume)

    async def reset(self, from_step: str) -> dict[str, Any]:
        return await asyncio.to_thread(self.sync.reset, from_step)


class AsyncClient:
    """``await AsyncClient().submit("echo", {...})``: every :class:`Client` method, awaited
    (same arguments). ``submit``, ``job`` and ``retry`` answer an :class:`AsyncJobHandle`."""

    def __init__(self, url: str | None = None, **options: Any) -> None:
        self.sync = Client(url, **options)

    async def submit(self, task: Any, payload: Any = None, **options: Any) -> AsyncJobHandle:
        return AsyncJobHandle(await asyncio.to_thread(self.sync.submit, task, payload,
                                                      **options))

    async def submit_target(self, target: Any, **options: Any) -> AsyncJobHandle:
        return AsyncJobHandle(await asyncio.to_thread(self.sync.submit_target, target,
                                                      **options))

    async def job(self, job_id: str) -> AsyncJobHandle:
        return AsyncJobHandle(await asyncio.to_thread(self.sync.job, job_id))

    async def retry(self, job_id: str) -> AsyncJobHandle:
        return AsyncJobHandle(await asyncio.to_thread(self.sync.retry, job_id))

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.sync, name)
        if not callable(method) or name.startswith("_"):
            return method

        async def call(*args: Any, **kwargs: Any) -> Any:
            return await asyncio.to_thread(method, *args, **kwargs)

        call.__name__ = name
        return call
