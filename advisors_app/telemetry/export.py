"""Sending the turns' spans: a tracer provider of our own, and the ``after_commit`` hook.

The provider is the app's, not OpenTelemetry's global one: the core's live
:class:`~advisors_app.core.tracing.OpenTelemetryObserver` writes to the global provider (a
no-op unless the project configures an SDK), so the turn is exported once, from its recorded
trace, whatever the project does with the global provider. Spans are batched and sent by the
SDK's background thread (``BatchSpanProcessor``): the hook only builds them.

:func:`connect` is called by the app config when ``ADVISORS["OPENTELEMETRY"]`` is set; the
hook runs once a turn's transaction committed (a turn whose messages failed to write is not
exported).
"""

from __future__ import annotations

import logging
from typing import Any

from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import Tracer

from advisors_app.conf import app_settings
from advisors_app.telemetry.setting import opentelemetry_errors
from advisors_app.telemetry.spans import record_turn

__all__ = ["connect", "export_turn", "provider", "set_processor", "shutdown"]

logger = logging.getLogger(__name__)

_SCOPE = "advisors_app"
_provider: TracerProvider | None = None
_tracer: Tracer | None = None


def _exporter(setting: bool | dict[str, Any]) -> Any:
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    if not isinstance(setting, dict):
        return OTLPSpanExporter()  # OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT, _HEADERS, _TIMEOUT
    endpoint = setting["endpoint"].rstrip("/")
    if not endpoint.endswith("/v1/traces"):
        endpoint += "/v1/traces"
    return OTLPSpanExporter(
        endpoint=endpoint,
        headers=dict(setting.get("headers") or {}),
        timeout=setting.get("timeout"),
    )


def _resource(setting: bool | dict[str, Any]) -> Resource:
    # Resource.create reads OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES; the setting's name
    # wins over them.
    name = setting.get("service_name") if isinstance(setting, dict) else None
    return Resource.create({SERVICE_NAME: name} if name else {})


def set_processor(processor: SpanProcessor, setting: bool | dict[str, Any] = True) -> None:
    """Export through ``processor`` from now on (a fresh provider): what :func:`connect`
    does with the OTLP exporter, and tests with an in-memory one."""
    global _provider, _tracer
    shutdown()
    _provider = TracerProvider(resource=_resource(setting))
    _provider.add_span_processor(processor)
    _tracer = _provider.get_tracer(_SCOPE)


def provider() -> TracerProvider | None:
    """The provider turns are exported through (``None``: not connected)."""
    return _provider


def shutdown() -> None:
    """Flush and stop the provider (spans still queued are sent)."""
    global _provider, _tracer
    if _provider is not None:
        _provider.shutdown()
    _provider = _tracer = None


def export_turn(finished: Any) -> None:
    """The ``after_commit`` hook: the finished turn's spans, handed to the batch processor."""
    if _tracer is not None:
        record_turn(_tracer, finished)


def connect() -> bool:
    """Export through the OTLP/HTTP exporter as ``ADVISORS["OPENTELEMETRY"]`` says (the app
    config calls it when the setting is on, and adds :func:`export_turn` to the turn's
    ``after_commit`` stage); ``False`` when the setting is invalid."""
    setting = app_settings.OPENTELEMETRY
    if opentelemetry_errors(setting):
        return False  # the system check reports it (E015); the turns run unexported
    set_processor(BatchSpanProcessor(_exporter(setting)), setting)
    return True
