"""Configuring the OpenTelemetry SDK (the ``otel`` extra) from the standard environment.

Only when asked: ``OTEL_TRACES_EXPORTER`` names an exporter (``otlp``, ``console``) or an
OTLP endpoint is set (``OTEL_EXPORTER_OTLP_ENDPOINT`` / ``..._TRACES_ENDPOINT``), and
``OTEL_SDK_DISABLED`` is not ``true``. Otherwise, or without the extra installed, spans stay
the API's no-op. On Lambda the ADOT layer configures the SDK itself (``cdk/tracing.py``).
``OTEL_SERVICE_NAME`` and ``OTEL_RESOURCE_ATTRIBUTES`` name the process as the SDK reads
them; the default service name says which Leasehold process it is.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping

log = logging.getLogger(__name__)


def wanted(env: Mapping[str, str] | None = None) -> str | None:
    """The exporter the environment asks for (``otlp``, ``console``), or None."""
    env = os.environ if env is None else env
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return None
    exporters = [e.strip() for e in env.get("OTEL_TRACES_EXPORTER", "").split(",") if e.strip()]
    if "none" in exporters:
        return None
    if exporters:
        return exporters[0]
    endpoint = env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or \
        env.get("OTEL_EXPORTER_OTLP_ENDPOINT")
    return "otlp" if endpoint else None


def otlp_environment(url: str) -> dict[str, str]:
    """What ``leasehold dev --otlp URL`` puts in its environment (its workers inherit it)."""
    return {"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_ENDPOINT": url,
            "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"}


def configure(service: str) -> bool:
    """Install the SDK with a batch exporter as the environment asks; True when it did."""
    exporter = wanted()
    if exporter is None:
        return False
    try:
        from opentelemetry import trace
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import (
            BatchSpanProcessor,
            ConsoleSpanExporter,
            SpanExporter,
        )
    except ImportError:
        log.warning("OTEL_* asks for %s traces but the SDK is not installed: pip install "
                    "'leasehold[otel]'", exporter)
        return False
    span_exporter: SpanExporter
    if exporter == "console":
        span_exporter = ConsoleSpanExporter()
    elif exporter == "otlp":
        protocol = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or \
            os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL") or "http/protobuf"
        if protocol != "http/protobuf":
            log.warning("OTEL_EXPORTER_OTLP_PROTOCOL=%s: Leasehold's otel extra exports "
                        "http/protobuf only; traces are not exported", protocol)
            return False
        try:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        except ImportError:
            log.warning("the OTLP/HTTP exporter is not installed: pip install "
                        "'leasehold[otel]'")
            return False
        span_exporter = OTLPSpanExporter()
    else:
        log.warning("OTEL_TRACES_EXPORTER=%s is not one Leasehold sets up (otlp, console)",
                    exporter)
        return False
    attributes: dict[str, str | int] = {"process.pid": os.getpid()}
    if not os.environ.get("OTEL_SERVICE_NAME"):
        attributes["service.name"] = service
    provider = TracerProvider(resource=Resource.create(attributes))
    provider.add_span_processor(BatchSpanProcessor(span_exporter))
    trace.set_tracer_provider(provider)
    return True
