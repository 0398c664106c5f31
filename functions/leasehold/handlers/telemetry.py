"""Metrics and structured logs for the Lambda functions (Powertools: EMF and JSON logs).

The metric names are the ones the CDK dashboard and alarms chart (``infra/monitoring.py``).
Namespace and service come from ``POWERTOOLS_METRICS_NAMESPACE`` / ``POWERTOOLS_SERVICE_NAME``,
which the stack sets on every function. The local runtime does not install the observer: EMF
is CloudWatch's format, and a laptop has no CloudWatch.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.logging.utils import copy_config_to_registered_loggers
from aws_lambda_powertools.metrics import MetricUnit

from leasehold.core.states import JobState

if TYPE_CHECKING:  # types only: the api handler imports this module and defers the rest
    from leasehold.core.jobs import Job
    from leasehold.lifecycle.app import Leasehold

metrics = Metrics()
logger = Logger()
# The library logs through stdlib loggers named ``leasehold.*``; in Lambda they get the same
# JSON formatter, so every line carries the keys the worker adds (job_id, tenant).
copy_config_to_registered_loggers(source_logger=logger, include={"leasehold"},
                                  log_level=logging.INFO)

F = TypeVar("F", bound=Callable[..., Any])


def metric_for(job: Job, source: JobState | None) -> tuple[str, float, MetricUnit] | None:
    """Which metric a state change feeds (pure, so the mapping is tested on its own)."""
    if source is None:
        return ("JobsSubmitted", 1, MetricUnit.Count)
    if job.state is JobState.SUCCEEDED:
        return ("JobsSucceeded", 1, MetricUnit.Count)
    if job.state is JobState.DEAD:
        return ("JobsDead", 1, MetricUnit.Count)
    if source is JobState.RUNNING and job.state in (JobState.QUEUED, JobState.SCHEDULED):
        last = job.history[-1] if job.history else None
        expired = last is not None and last.actor == "sweeper"
        return ("LeasesExpired" if expired else "JobsRetried", 1, MetricUnit.Count)
    if source is JobState.QUEUED and job.state is JobState.RUNNING and job.started_at:
        return ("ScheduleLatenessMs", max(0, job.started_at - job.run_at),
                MetricUnit.Milliseconds)
    return None


def observe(job: Job, source: JobState | None) -> None:
    found = metric_for(job, source)
    if found is not None:
        name, value, unit = found
        metrics.add_metric(name=name, unit=unit, value=value)


def install(app: Leasehold) -> Leasehold:
    """Feed ``app``'s state changes into the metrics (call once per cold start)."""
    from leasehold.events.publishing import Publisher  # here: the api handler imports us
    # Read the function's configuration now rather than at import, whichever came first.
    for target in (metrics, metrics.provider):
        target.namespace = os.environ.get("POWERTOOLS_METRICS_NAMESPACE", target.namespace)
        target.service = os.environ.get("POWERTOOLS_SERVICE_NAME", target.service)
    app.store.observers.append(observe)
    app.measures.append(_measured)  # features' own figures (cells: the Region lease's age)
    for observer in app.store.observers:
        if isinstance(observer, Publisher):  # job state events given up on, for an alarm
            observer.on_unpublished = _unpublished
    return app


def _measured(name: str, value: float, unit: str) -> None:
    metrics.add_metric(name=name, unit=MetricUnit(unit), value=value)


def _unpublished(count: int) -> None:
    metrics.add_metric(name="JobEventsUnpublished", unit=MetricUnit.Count, value=count)


def instrumented(handler: F) -> F:
    """Flush EMF metrics and add the Lambda context to logs around a handler."""
    return metrics.log_metrics(logger.inject_lambda_context(handler))  # type: ignore[return-value]
