"""Built-in guard types: SafeGuard, BudgetGuard, PII masking, structured-output validation."""

from __future__ import annotations

from typing import Any

from advisors_app.core.advisor import HIGHEST_PRECEDENCE
from advisors_app.core.advisors.budget_guard import BudgetGuardAdvisor
from advisors_app.core.advisors.pii_masking import PiiMaskingAdvisor
from advisors_app.core.advisors.safe_guard import SafeGuardAdvisor
from advisors_app.core.advisors.structured_output_validation import (
    StructuredOutputValidationAdvisor,
)
from advisors_app.definition.registry import AdvisorSpec, AdvisorType

from ._schema import BuiltinTypes, object_schema

__all__ = ["TYPES"]


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
    return SafeGuardAdvisor(lists, order=spec.order, guard_output=params["guard_output"], **kwargs)


def _budget_guard(spec: AdvisorSpec) -> Any:
    params = spec.params
    kwargs = {k: params[k] for k in ("max_chars", "max_tokens", "message") if k in params}
    return BudgetGuardAdvisor(order=spec.order, **kwargs)


def _pii_masking(spec: AdvisorSpec) -> Any:
    from django.utils.crypto import salted_hmac

    params = spec.params
    # Derived from SECRET_KEY so every process masks one value with the same placeholder.
    secret = salted_hmac("advisors_app.pii_masking", "placeholders").digest()
    return PiiMaskingAdvisor(
        params["kinds"],
        phone_regions=params["phone_regions"],
        restore=params["restore"],
        secret=secret,
        order=spec.order,
    )


def _structured_output_validation(spec: AdvisorSpec) -> Any:
    params = spec.params
    return StructuredOutputValidationAdvisor(
        output_json_schema=params["output_json_schema"],
        max_repeat_attempts=params["max_repeat_attempts"],
        order=spec.order,
        raise_on_failure=params["raise_on_failure"],
    )


TYPES: BuiltinTypes = (
    (
        "safe_guard",
        lambda: AdvisorType(
            key="safe_guard",
            label="Safe guard",
            factory=_safe_guard,
            advisor_class=SafeGuardAdvisor,
            # Divergence from the class's (Spring's) order 0, which is inside memory (H+200):
            # a blocked message would be remembered and block every later turn (bug case B14;
            # the core also stops that by not storing refusals). Stored chains: outside memory.
            default_order=HIGHEST_PRECEDENCE + 100,
            description="Answers with the failure response instead of calling the model when "
            "the input contains a sensitive word (SafeGuardAdvisor).",
            params_schema=object_schema(
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
            advisor_class=BudgetGuardAdvisor,
            description="Refuses input longer than a character or token budget.",
            params_schema=object_schema(
                {
                    "max_chars": {"type": ["integer", "null"], "minimum": 0},
                    "max_tokens": {"type": ["integer", "null"], "minimum": 0},
                    "message": {"type": "string", "minLength": 1},
                }
            ),
        ),
    ),
    (
        "pii_masking",
        lambda: AdvisorType(
            key="pii_masking",
            label="PII masking",
            factory=_pii_masking,
            advisor_class=PiiMaskingAdvisor,
            description="Replaces emails, phone, card and ID numbers with placeholders before "
            "the model, and restores them in the answer (PiiMaskingAdvisor).",
            params_schema=object_schema(
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
        "structured_output_validation",
        lambda: AdvisorType(
            key="structured_output_validation",
            label="Structured output validation",
            factory=_structured_output_validation,
            advisor_class=StructuredOutputValidationAdvisor,
            description="Validates the answer against a JSON Schema and asks again when it "
            "does not match (StructuredOutputValidationAdvisor).",
            params_schema=object_schema(
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
)
