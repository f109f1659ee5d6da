"""Built-in observing, recovery and caching types.

Logging, audit, citations, fallback models, timing and the semantic cache.
"""

from __future__ import annotations

from typing import Any

from advisors_app.core.advisors.audit import AuditAdvisor
from advisors_app.core.advisors.citation import CitationAdvisor
from advisors_app.core.advisors.fallback import FallbackAdvisor
from advisors_app.core.advisors.semantic_cache import SemanticCacheAdvisor
from advisors_app.core.advisors.simple_logger import SimpleLoggerAdvisor
from advisors_app.core.advisors.timing import TimingAdvisor
from advisors_app.definition.registry import AdvisorSpec, AdvisorType

from ._schema import BuiltinTypes, object_schema

__all__ = ["TYPES"]


def _simple_logger(spec: AdvisorSpec) -> Any:
    return SimpleLoggerAdvisor(order=spec.order)


def _audit(spec: AdvisorSpec) -> Any:
    from advisors_app.stores.audit import DjangoAuditSink

    return AuditAdvisor(DjangoAuditSink(), order=spec.order)


def _citation(spec: AdvisorSpec) -> Any:
    return CitationAdvisor(render=spec.params["render"], order=spec.order)


def _fallback(spec: AdvisorSpec) -> Any:
    models = [spec.chat_model(slug) for slug in spec.params["models"]]
    return FallbackAdvisor(models, order=spec.order)


def _timing(spec: AdvisorSpec) -> Any:
    return TimingAdvisor(order=spec.order)


def _semantic_cache(spec: AdvisorSpec) -> Any:
    from advisors_app.stores.semantic_cache import PgVectorSemanticCache

    params = spec.params
    cache = PgVectorSemanticCache(
        spec.embedding_model(params.get("embedding_model")),
        similarity_threshold=params["similarity_threshold"],
        ttl=params.get("ttl"),
    )
    return SemanticCacheAdvisor(
        cache,
        allow_shared=params["allow_shared"],
        namespace=params["namespace"],
        cache_tool_turns=params["cache_tool_turns"],
        fail_open=params["fail_open"],
        order=spec.order,
    )


TYPES: BuiltinTypes = (
    (
        "simple_logger",
        lambda: AdvisorType(
            key="simple_logger",
            label="Simple logger",
            factory=_simple_logger,
            advisor_class=SimpleLoggerAdvisor,
            description="Logs each request and response at DEBUG (SimpleLoggerAdvisor).",
        ),
    ),
    (
        "audit",
        lambda: AdvisorType(
            key="audit",
            label="Audit",
            factory=_audit,
            advisor_class=AuditAdvisor,
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
            advisor_class=CitationAdvisor,
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
            advisor_class=FallbackAdvisor,
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
            advisor_class=TimingAdvisor,
            description="Puts the time to first token and the total time on the response "
            "(TimingAdvisor).",
        ),
    ),
    (
        "semantic_cache",
        lambda: AdvisorType(
            key="semantic_cache",
            label="Semantic cache",
            factory=_semantic_cache,
            advisor_class=SemanticCacheAdvisor,
            description="Answers a question similar to one asked before (same user, system "
            "prompt, options and history) from the cache, without calling the model "
            "(SemanticCacheAdvisor).",
            params_schema=object_schema(
                {
                    "embedding_model": {
                        "type": "string",
                        "x-reference": "embedding_model",
                        "description": "Model for question embeddings (default: MiniLM, 384).",
                    },
                    "similarity_threshold": {
                        "type": "number",
                        "minimum": 0,
                        "maximum": 1,
                        "default": 0.8,
                        "description": "Lowest cosine similarity of a hit.",
                    },
                    "ttl": {
                        "type": ["number", "null"],
                        "exclusiveMinimum": 0,
                        "description": "Seconds an answer stays cached (null: forever).",
                    },
                    "allow_shared": {
                        "type": "boolean",
                        "default": False,
                        "description": "Cache requests without a user in one shared scope.",
                    },
                    "namespace": {"type": "string", "default": ""},
                    "cache_tool_turns": {"type": "boolean", "default": False},
                    "fail_open": {
                        "type": "boolean",
                        "default": True,
                        "description": "Answer without the cache when it fails.",
                    },
                }
            ),
        ),
    ),
)
