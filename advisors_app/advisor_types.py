"""The built-in advisor types of the registry, keyed by their core module's name.

Each entry maps admin-editable params (a JSON Schema) onto the keyword arguments of a core
advisor in ``advisors_app.core.advisors``. Default orders are Spring AI's except where a seed
defect says otherwise (each noted on its entry). Registered by ``AdvisorsAppConfig.ready()``.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable
from typing import Any

from advisors_app.core.advisor import (
    DEFAULT_CHAT_MEMORY_PRECEDENCE_ORDER,
    HIGHEST_PRECEDENCE,
    LOWEST_PRECEDENCE,
)
from advisors_app.registry import AdvisorSpec, AdvisorType, advisor_types

__all__ = ["BUILTIN_TYPES", "register_builtins"]


def _advisor(module: str, name: str) -> Any:
    return getattr(importlib.import_module(f"advisors_app.core.advisors.{module}"), name)


def _object(properties: dict[str, Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
    schema: dict[str, Any] = {
        "type": "object",
        "properties": properties,
        "additionalProperties": False,
    }
    if required:
        schema["required"] = list(required)
    return schema


def _simple_logger(spec: AdvisorSpec) -> Any:
    return _advisor("simple_logger", "SimpleLoggerAdvisor")(order=spec.order)


def _safe_guard(spec: AdvisorSpec) -> Any:
    params = spec.params
    lists: dict[str, list[str]] = {slug: spec.word_list(slug) for slug in params["word_lists"]}
    if params.get("words"):
        lists["inline"] = list(params["words"])
    kwargs = {
        k: params[k]
        for k in ("failure_response", "scope", "whole_words", "case_sensitive", "normalize")
        if k in params
    }
    return _advisor("safe_guard", "SafeGuardAdvisor")(
        lists, order=spec.order, guard_output=params["guard_output"], **kwargs
    )


def _budget_guard(spec: AdvisorSpec) -> Any:
    params = spec.params
    kwargs = {k: params[k] for k in ("max_chars", "max_tokens", "message") if k in params}
    return _advisor("budget_guard", "BudgetGuardAdvisor")(order=spec.order, **kwargs)


def _structured_output_validation(spec: AdvisorSpec) -> Any:
    params = spec.params
    return _advisor("structured_output_validation", "StructuredOutputValidationAdvisor")(
        output_json_schema=params["output_json_schema"],
        max_repeat_attempts=params["max_repeat_attempts"],
        order=spec.order,
        raise_on_failure=params["raise_on_failure"],
    )


def _message_chat_memory(spec: AdvisorSpec) -> Any:
    memory = spec.chat_memory(max_messages=spec.params["max_messages"])
    return _advisor("message_chat_memory", "MessageChatMemoryAdvisor")(memory, order=spec.order)


def _prompt_chat_memory(spec: AdvisorSpec) -> Any:
    memory = spec.chat_memory(max_messages=spec.params["max_messages"])
    slug = spec.params.get("system_prompt_template")
    template = spec.template(slug) if slug else None
    return _advisor("prompt_chat_memory", "PromptChatMemoryAdvisor")(
        memory, system_prompt_template=template, order=spec.order
    )


def _audit(spec: AdvisorSpec) -> Any:
    from advisors_app.stores.audit import DjangoAuditSink

    return _advisor("audit", "AuditAdvisor")(DjangoAuditSink(), order=spec.order)


def _citation(spec: AdvisorSpec) -> Any:
    return _advisor("citation", "CitationAdvisor")(render=spec.params["render"], order=spec.order)


def _fallback(spec: AdvisorSpec) -> Any:
    models = [spec.chat_model(slug) for slug in spec.params["models"]]
    return _advisor("fallback", "FallbackAdvisor")(models, order=spec.order)


def _pii_masking(spec: AdvisorSpec) -> Any:
    from django.utils.crypto import salted_hmac

    params = spec.params
    # Derived from SECRET_KEY so every process masks one value with the same placeholder.
    secret = salted_hmac("advisors_app.pii_masking", "placeholders").digest()
    return _advisor("pii_masking", "PiiMaskingAdvisor")(
        params["kinds"],
        phone_regions=params["phone_regions"],
        restore=params["restore"],
        secret=secret,
        order=spec.order,
    )


def _timing(spec: AdvisorSpec) -> Any:
    return _advisor("timing", "TimingAdvisor")(order=spec.order)


_MAX_MESSAGES = {
    "type": "integer",
    "minimum": 1,
    "maximum": 1000,
    "default": 20,
    "description": "Newest messages sent as history (whole turns).",
}

#: ``(key, make)`` of each built-in type; ``key`` is also its module in ``core.advisors``.
BUILTIN_TYPES: tuple[tuple[str, Callable[[], AdvisorType]], ...] = (
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
        "safe_guard",
        lambda: AdvisorType(
            key="safe_guard",
            label="Safe guard",
            factory=_safe_guard,
            # Divergence: Spring's order is 0, inside memory (H+200), so a blocked message is
            # remembered and blocks every later turn (bug case B14). Here: outside memory.
            default_order=HIGHEST_PRECEDENCE + 100,
            roles=frozenset({"guard"}),
            description="Answers with the failure response instead of calling the model when "
            "the input contains a sensitive word (SafeGuardAdvisor).",
            params_schema=_object(
                {
                    "word_lists": {
                        "type": "array",
                        "items": {"type": "string", "x-reference": "word_list"},
                        "default": [],
                        "description": "Slugs of sensitive-word lists.",
                    },
                    "words": {
                        "type": "array",
                        "items": {"type": "string", "minLength": 1},
                        "default": [],
                        "description": "Extra words, inline.",
                    },
                    "failure_response": {"type": "string", "minLength": 1},
                    "scope": {
                        "enum": ["user", "prompt"],
                        "default": "user",
                        "description": "user: the new user message; prompt: every message.",
                    },
                    "whole_words": {"type": "boolean", "default": False},
                    "case_sensitive": {"type": "boolean", "default": False},
                    "normalize": {
                        "type": "boolean",
                        "default": True,
                        "description": "Fold Unicode look-alikes and invisible characters.",
                    },
                    "guard_output": {
                        "type": "boolean",
                        "default": False,
                        "description": "Also check the model's answer.",
                    },
                }
            ),
        ),
    ),
    (
        "budget_guard",
        lambda: AdvisorType(
            key="budget_guard",
            label="Budget guard",
            factory=_budget_guard,
            default_order=HIGHEST_PRECEDENCE + 150,
            roles=frozenset({"guard"}),
            description="Refuses input longer than a character or token budget.",
            params_schema=_object(
                {
                    "max_chars": {"type": ["integer", "null"], "minimum": 0},
                    "max_tokens": {"type": ["integer", "null"], "minimum": 0},
                    "message": {"type": "string", "minLength": 1},
                }
            ),
        ),
    ),
    (
        "structured_output_validation",
        lambda: AdvisorType(
            key="structured_output_validation",
            label="Structured output validation",
            factory=_structured_output_validation,
            default_order=LOWEST_PRECEDENCE - 2000,
            description="Validates the answer against a JSON Schema and asks again when it "
            "does not match (StructuredOutputValidationAdvisor).",
            params_schema=_object(
                {
                    "output_json_schema": {
                        "type": "object",
                        "description": "JSON Schema the answer must match.",
                    },
                    "max_repeat_attempts": {"type": "integer", "minimum": 0, "default": 3},
                    "raise_on_failure": {"type": "boolean", "default": False},
                },
                required=("output_json_schema",),
            ),
        ),
    ),
    (
        "message_chat_memory",
        lambda: AdvisorType(
            key="message_chat_memory",
            label="Chat memory (messages)",
            factory=_message_chat_memory,
            default_order=DEFAULT_CHAT_MEMORY_PRECEDENCE_ORDER,
            roles=frozenset({"memory"}),
            description="Adds the conversation's history to the prompt as messages and "
            "stores each turn (MessageChatMemoryAdvisor).",
            params_schema=_object({"max_messages": _MAX_MESSAGES}),
        ),
    ),
    (
        "prompt_chat_memory",
        lambda: AdvisorType(
            key="prompt_chat_memory",
            label="Chat memory (in the system text)",
            factory=_prompt_chat_memory,
            default_order=DEFAULT_CHAT_MEMORY_PRECEDENCE_ORDER,
            roles=frozenset({"memory"}),
            description="Renders the conversation's history into the system text and stores "
            "each turn (PromptChatMemoryAdvisor).",
            params_schema=_object(
                {
                    "max_messages": _MAX_MESSAGES,
                    "system_prompt_template": {
                        "type": "string",
                        "x-reference": "prompt_template",
                        "x-required-placeholders": ["instructions", "memory"],
                    },
                }
            ),
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
            params_schema=_object(
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
            params_schema=_object(
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
        "pii_masking",
        lambda: AdvisorType(
            key="pii_masking",
            label="PII masking",
            factory=_pii_masking,
            default_order=HIGHEST_PRECEDENCE + 150,
            description="Replaces emails, phone, card and ID numbers with placeholders before "
            "the model, and restores them in the answer (PiiMaskingAdvisor).",
            params_schema=_object(
                {
                    "kinds": {
                        "type": "array",
                        "items": {
                            "enum": [
                                "EMAIL",
                                "IBAN",
                                "CREDIT_CARD",
                                "CN_RIC",
                                "IP_ADDRESS",
                                "PHONE",
                            ]
                        },
                        "uniqueItems": True,
                        "default": [
                            "EMAIL",
                            "IBAN",
                            "CREDIT_CARD",
                            "CN_RIC",
                            "IP_ADDRESS",
                            "PHONE",
                        ],
                    },
                    "phone_regions": {
                        "type": "array",
                        "items": {"type": "string", "pattern": "^[A-Z]{2}$"},
                        "default": ["US", "CN"],
                    },
                    "restore": {
                        "type": "boolean",
                        "default": True,
                        "description": "Put the original values back into the answer.",
                    },
                }
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


def _installed(module: str) -> bool:
    return importlib.util.find_spec(f"advisors_app.core.advisors.{module}") is not None


def register_builtins() -> None:
    """Register every built-in type whose advisor module is installed (idempotent)."""
    for key, make in BUILTIN_TYPES:
        if key not in advisor_types and _installed(key):
            advisor_types.register(make())
