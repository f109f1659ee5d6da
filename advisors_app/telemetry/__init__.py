"""OpenTelemetry export of turns with the GenAI semantic conventions, when
``ADVISORS["OPENTELEMETRY"]`` is set (docs/observability.md): ``setting`` validates the setting
(system check ``advisors_app.E015``), ``spans`` builds a finished turn's spans from its trace,
``export`` sends them through ``opentelemetry-sdk`` and the OTLP/HTTP exporter after the turn
committed. Nothing here is imported while the setting is off."""
