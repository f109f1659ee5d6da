"""Built-in observing and recovery types: logging, audit, citations, fallback models, timing."""

from __future__ import annotations

from typing import Any

from advisors_app.core.advisor import (
    HIGHEST_PRECEDENCE,
    LOWEST_PRECEDENCE,
)
from advisors_app.registry import AdvisorSpec, AdvisorType

from ._schema import BuiltinTypes, advisor, object_schema

__all__ = ["TYPES"]


def _simple_logger(spec: AdvisorSpec) -> Any:
    return advisor("simple_logger", "SimpleLoggerAdvisor")(order=spec.order)


def _audit(spec: AdvisorSpec) -> Any:
    from advisors_app.stores.audit import DjangoAuditSink

    return advisor("audit", "AuditAdvisor")(DjangoAuditSink(), order=spec.order)


def _citation(spec: AdvisorSpec) -> Any:
    return advisor("citation", "CitationAdvisor")(render=spec.params["render"], order=spec.order)


def _fallback(spec: AdvisorSpec) -> Any:
    models = [spec.chat_model(slug) for slug in spec.params["models"]]
    return advisor("fallback", "FallbackAdvisor")(models, order=spec.order)


def _timing(spec: AdvisorSpec) -> Any:
    return advisor("timing", "TimingAdvisor")(order=spec.order)


TYPES: BuiltinTypes = (
    (
        "simple_logger",
        lambda: AdvisorType(
            key="simple_logger",
            label="Simple logger",
            factory=_simple_logger,
            default_order=0,
            roles=frozenset({"logging"}),
            description="Logs each request and response at DEBUG (SimpleLoggerAdvisor).",
        ),
    ),
    (
        "audit",
        lambda: AdvisorType(
            key="audit",
            label="Audit",
            factory=_audit,
            default_order=HIGHEST_PRECEDENCE + 100,
            roles=frozenset({"logging"}),
            after_side_effects=True,
            description="Writes one audit entry per call or stream, with its prompt, answer, "
            "usage and outcome (AuditAdvisor).",
        ),
    ),
    (
        "citation",
        lambda: AdvisorType(
            key="citation",
            label="Citations",
            factory=_citation,
            default_order=LOWEST_PRECEDENCE - 200,
            description="Lists the sources of the retrieved documents in the response metadata "
            "(CitationAdvisor).",
            params_schema=object_schema(
                {
                    "render": {
                        "type": "boolean",
                        "default": False,
                        "description": "Also append the sources to the answer text.",
                    }
                }
            ),
        ),
    ),
    (
        "fallback",
        lambda: AdvisorType(
            key="fallback",
            label="Fallback models",
            factory=_fallback,
            default_order=LOWEST_PRECEDENCE - 1000,
            description="Retries with the next model on timeouts, 429, 5xx and broken streams "
            "(FallbackAdvisor).",
            params_schema=object_schema(
                {
                    "models": {
                        "type": "array",
                        "items": {"type": "string", "x-reference": "chat_model"},
                        "minItems": 1,
                        "description": "Slugs of chat models to try, in order.",
                    }
                },
                required=("models",),
            ),
        ),
    ),
    (
        "timing",
        lambda: AdvisorType(
            key="timing",
            label="Timing",
            factory=_timing,
            default_order=100,
            roles=frozenset({"logging"}),
            description="Puts the time to first token and the total time on the response "
            "(TimingAdvisor).",
        ),
    ),
)
