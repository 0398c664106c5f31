"""Job templates: what a schedule or a trigger submits, resolved once when it is written.

The template keeps the task's defaults as they were resolved (pool, priority, attempts,
timeout, retry), so the ticker and the trigger dispatcher build jobs without importing the
user's task code, and a schedule keeps firing the job its owner saw validated.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from leasehold.policy import RetryPolicy
from leasehold.registry import TaskRegistry
from leasehold.spec import JobSpec, ResolvedSpec, resolve


@dataclass(frozen=True, kw_only=True)
class JobTemplate:
    task: str
    payload_json: str
    tenant: str
    pool: str
    priority: str
    max_attempts: int
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    timeout_seconds: float = 300.0
    labels: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def resolve(cls, registry: TaskRegistry, *, pools: tuple[str, ...], now: int, task: Any,
                payload: Any, tenant: str, pool: Any = None, priority: Any = None,
                max_attempts: Any = None, timeout_seconds: Any = None,
                labels: Any = None) -> JobTemplate:
        """Validate as a submission would (errors name the field) and keep the result."""
        resolved = resolve(JobSpec(task=task, payload=payload, tenant=tenant, pool=pool,
                                   priority=priority, max_attempts=max_attempts,
                                   timeout_seconds=timeout_seconds, labels=labels or {}),
                           registry, pools=pools, now_ms=now)
        return cls(task=resolved.task, payload_json=resolved.payload_json,
                   tenant=resolved.tenant, pool=resolved.pool, priority=resolved.priority,
                   max_attempts=resolved.max_attempts, retry=resolved.retry,
                   timeout_seconds=resolved.timeout_seconds, labels=resolved.labels)

    @property
    def payload(self) -> Any:
        return json.loads(self.payload_json)

    def to_resolved(self, run_at: int, *, payload_json: str | None = None) -> ResolvedSpec:
        """The spec of one job from this template, due at ``run_at``."""
        payload = self.payload_json if payload_json is None else payload_json
        return ResolvedSpec(
            task=self.task, payload_json=payload, tenant=self.tenant, pool=self.pool,
            priority=self.priority, run_at_ms=run_at, idempotency_key=None,
            max_attempts=self.max_attempts, retry=self.retry,
            timeout_seconds=self.timeout_seconds, labels=dict(self.labels),
            spec_hash=self.fingerprint(payload),
        )

    def fingerprint(self, payload_json: str | None = None) -> str:
        item = self.to_item()
        if payload_json is not None:
            item["payload"] = payload_json
        text = json.dumps(item, sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()[:32]

    def to_item(self) -> dict[str, Any]:
        retry = {k: Decimal(str(v)) if isinstance(v, float) else v
                 for k, v in self.retry.to_dict().items() if v is not None}
        return {
            "task": self.task, "payload": self.payload_json, "tenant": self.tenant,
            "pool": self.pool, "priority": self.priority, "max_attempts": self.max_attempts,
            "retry": retry, "timeout_seconds": Decimal(str(self.timeout_seconds)),
            "labels": dict(self.labels),
        }

    @classmethod
    def from_item(cls, item: Mapping[str, Any]) -> JobTemplate:
        retry = {k: (int(v) if v == v.to_integral_value() else float(v))
                 if isinstance(v, Decimal) else v for k, v in dict(item.get("retry", {})).items()}
        return cls(
            task=str(item["task"]), payload_json=str(item.get("payload", "null")),
            tenant=str(item["tenant"]), pool=str(item["pool"]), priority=str(item["priority"]),
            max_attempts=int(item["max_attempts"]), retry=RetryPolicy.from_dict(retry),
            timeout_seconds=float(item.get("timeout_seconds", 300)),
            labels={str(k): str(v) for k, v in dict(item.get("labels", {})).items()},
        )
