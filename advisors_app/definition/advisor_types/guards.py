"""Built-in guard types: guard rails, SafeGuard, BudgetGuard, PII masking, structured-output
validation."""

from __future__ import annotations

from typing import Any

from advisors_app.core.advisor import HIGHEST_PRECEDENCE
from advisors_app.core.advisors.budget_guard import BudgetGuardAdvisor
from advisors_app.core.advisors.guard import (
    CHECK_FIRST,
    DEFAULT_BLOCK_MESSAGE,
    DEFAULT_HOLD_MESSAGE,
    RAIL_ACTIONS,
    STREAM_FIRST,
    GuardAdvisor,
    RailCheck,
)
from advisors_app.core.advisors.pii_masking import PiiMaskingAdvisor
from advisors_app.core.advisors.safe_guard import SafeGuardAdvisor
from advisors_app.core.advisors.structured_output_validation import (
    StructuredOutputValidationAdvisor,
)
from advisors_app.core.decision import ChatDecisionModel
from advisors_app.core.guards import COMMON_PARAMS, guard_checks
from advisors_app.definition.registry import AdvisorSpec, AdvisorType

from ._schema import BuiltinTypes, object_schema

__all__ = ["TYPES"]


class _GuardResources:
    """Word lists and decision models of one ``guard`` row, resolved through its spec."""

    def __init__(self, spec: AdvisorSpec, where: str) -> None:
        self.spec = spec
        self.where = where

    def word_lists(self, names: list[str] | None) -> dict[str, list[str]]:
        available = list(self.spec.params["word_lists"])
        unknown = sorted(set(names or ()) - set(available))
        if unknown:
            raise ValueError(
                f"{self.where}.word_lists: {unknown} must also be listed in params.word_lists"
            )
        return {slug: self.spec.word_list(slug) for slug in (names or available)}

    def decision_model(self, slug: str | None) -> Any:
        if slug is not None and slug not in self.spec.params["decision_models"]:
            raise ValueError(
                f"{self.where}.model: {slug!r} must also be listed in params.decision_models"
            )
        return ChatDecisionModel(self.spec.chat_model(slug))  # type: ignore[arg-type]


def _guard(spec: AdvisorSpec) -> Any:
    params = spec.params
    rails: dict[str, list[RailCheck]] = {}
    for rail, entries in params["rails"].items():
        for index, entry in enumerate(entries):
            where = f"params.rails.{rail}[{index}]"
            kind = guard_checks[entry["check"]]
            fail = entry.get("fail", "closed" if kind.fail_closed else "open")
            options = {
                "name": entry.get("name", ""),
                "timeout": entry.get("timeout"),
                "fail_closed": fail == "closed",
            }
            own = {k: v for k, v in entry.items() if k in kind.params}
            try:
                check = kind.build(own, options, _GuardResources(spec, where))
            except ValueError as exc:
                raise ValueError(f"{where}: {exc}") from exc
            rails.setdefault(rail, []).append(
                RailCheck(check, entry["action"], entry.get("message"))
            )
    return GuardAdvisor(
        rails,
        order=spec.order,
        block_message=params["block_message"],
        hold_message=params["hold_message"],
        stream_mode=params["stream_mode"],
        chunk_chars=params["chunk_chars"],
        context_chars=params["context_chars"],
    )


def _rail_entry_schema(rail: str) -> dict[str, Any]:
    """One rail entry: ``check`` and ``action``, the common params and every check's own."""
    properties: dict[str, Any] = {
        "check": {"enum": list(guard_checks.keys)},
        "action": {"enum": list(RAIL_ACTIONS[rail])},
        **COMMON_PARAMS,
    }
    for kind in guard_checks:
        properties.update(kind.params)
    return {
        "type": "object",
        "required": ["check", "action"],
        "properties": properties,
        "additionalProperties": False,
        "allOf": [
            {
                "if": {"properties": {"check": {"const": kind.key}}, "required": ["check"]},
                "then": {"required": list(kind.required)},
            }
            for kind in guard_checks
            if kind.required
        ],
    }


def _guard_schema() -> dict[str, Any]:
    return object_schema(
        {
            "rails": {
                "type": "object",
                "properties": {
                    rail: {"type": "array", "items": _rail_entry_schema(rail)}
                    for rail in RAIL_ACTIONS
                },
                "additionalProperties": False,
                "default": {},
                "description": "Rail name → checks, each {check, action, ...}.",
            },
            "word_lists": {
                "type": "array",
                "items": {"type": "string", "x-reference": "word_list"},
                "default": [],
                "description": "Slugs of word lists the words checks may use.",
            },
            "decision_models": {
                "type": "array",
                "items": {"type": "string", "x-reference": "chat_model"},
                "default": [],
                "description": "Slugs of chat models the decision and topic checks may use.",
            },
            "block_message": {"type": "string", "minLength": 1, "default": DEFAULT_BLOCK_MESSAGE},
            "hold_message": {"type": "string", "minLength": 1, "default": DEFAULT_HOLD_MESSAGE},
            "stream_mode": {
                "enum": [CHECK_FIRST, STREAM_FIRST],
                "default": CHECK_FIRST,
                "description": "check_first: stream output released once checked; "
                "stream_first: released at once, retracted if a check flags it.",
            },
            "chunk_chars": {"type": "integer", "minimum": 1, "default": 200},
            "context_chars": {"type": "integer", "minimum": 0, "default": 50},
        }
    )


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
        "guard",
        lambda: AdvisorType(
            key="guard",
            label="Guard rails",
            factory=_guard,
            advisor_class=GuardAdvisor,
            description="Checks the input, retrieved documents, tool arguments and results, "
            "and the answer (word lists, PII, regex, secrets, prompt injection, decision-model "
            "questions), each with an action: block, redact, drop, reask, hold or log "
            "(GuardAdvisor).",
            params_schema=_guard_schema(),
        ),
    ),
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
