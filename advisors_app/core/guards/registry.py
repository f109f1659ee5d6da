"""The guard-check registry: check kinds by key, their params, and how to build them.

A rail entry of the ``guard`` advisor type is ``{"check": <key>, "action": <action>, ...}``;
the other keys are the common ones (``name``, ``timeout``, ``fail``, ``message``) and the
check's own params (:attr:`CheckKind.params`, JSON Schema properties). :meth:`CheckKind.build`
makes the :class:`~.checks.GuardCheck`, resolving word lists and chat models through
``resources`` (the Django layer's advisor spec), so the core never queries anything.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..decision.injection import INJECTION_THRESHOLD
from ..registry import Registry
from .checks import (
    DecisionCheck,
    GuardCheck,
    PiiCheck,
    PromptInjectionCheck,
    RegexCheck,
    SecretsCheck,
    TopicCheck,
    WordsCheck,
)

__all__ = ["COMMON_PARAMS", "CheckKind", "CheckResources", "GuardCheckRegistry", "guard_checks"]


class CheckResources(Protocol):
    """What building a check may need: word lists by name and decision models by slug."""

    def word_lists(self, names: list[str] | None) -> dict[str, list[str]]: ...

    def decision_model(self, slug: str | None) -> Any: ...


#: Params every rail entry may have besides ``check`` and ``action``.
COMMON_PARAMS: dict[str, Any] = {
    "name": {"type": "string", "minLength": 1, "description": "Name in verdicts."},
    "timeout": {
        "type": ["number", "null"],
        "exclusiveMinimum": 0,
        "description": "Time budget of the check, in seconds.",
    },
    "fail": {
        "enum": ["open", "closed"],
        "description": "On an error or a timeout: pass the text (open) or flag it (closed).",
    },
    "message": {"type": "string", "minLength": 1, "description": "Refusal text of a block."},
}


@dataclass(frozen=True)
class CheckKind:
    """A kind of guard check: ``key``, ``label``, its ``params`` (JSON Schema properties),
    the ``required`` ones, and ``build(params, options, resources)`` where ``options`` are the
    :class:`~.checks.GuardCheck` keyword arguments (name, timeout, fail_closed)."""

    key: str
    label: str
    build: Callable[[Mapping[str, Any], dict[str, Any], CheckResources], GuardCheck]
    params: Mapping[str, Any] = field(default_factory=dict)
    required: tuple[str, ...] = ()
    #: Whether the check's default is to fail closed (classifiers) or open.
    fail_closed: bool = True


class GuardCheckRegistry(Registry[CheckKind]):
    """Guard-check kinds by key (a :class:`~advisors_app.core.registry.Registry`)."""

    kind = "guard check"
    kinds = "checks"


def _words(params: Mapping[str, Any], options: dict[str, Any], r: CheckResources) -> GuardCheck:
    lists: dict[str | None, list[str]] = {
        name: words for name, words in r.word_lists(params.get("word_lists")).items()
    }
    if params.get("words"):
        lists[None] = list(params["words"])
    return WordsCheck(
        lists,
        whole_words=bool(params.get("whole_words", False)),
        case_sensitive=bool(params.get("case_sensitive", False)),
        **options,
    )


def _decision(params: Mapping[str, Any], options: dict[str, Any], r: CheckResources) -> GuardCheck:
    return DecisionCheck(
        r.decision_model(params.get("model")),
        params["question"],
        flag_choice=params.get("flag_choice", "yes"),
        choices=params.get("choices"),
        threshold=float(params.get("threshold", 0.5)),
        **options,
    )


def _topic(params: Mapping[str, Any], options: dict[str, Any], r: CheckResources) -> GuardCheck:
    return TopicCheck(
        r.decision_model(params.get("model")),
        params["topic"],
        threshold=float(params.get("threshold", 0.5)),
        **options,
    )


_THRESHOLD = {"type": "number", "minimum": 0, "maximum": 1, "default": 0.5}
_MODEL = {
    "type": ["string", "null"],
    "description": "Slug of the chat model that answers (default: the default chat model).",
}

guard_checks = GuardCheckRegistry(
    [
        CheckKind(
            "words",
            "Sensitive words",
            _words,
            {
                "word_lists": {
                    "type": "array",
                    "items": {"type": "string"},
                    "description": "Names of the guard's word_lists to use (default: all).",
                },
                "words": {"type": "array", "items": {"type": "string", "minLength": 1}},
                "whole_words": {"type": "boolean"},
                "case_sensitive": {"type": "boolean"},
            },
            fail_closed=False,
        ),
        CheckKind(
            "pii",
            "Personal data",
            lambda p, o, r: PiiCheck(
                p.get("kinds"), phone_regions=p.get("phone_regions", ("US", "CN")), **o
            ),
            {
                "kinds": {
                    "type": "array",
                    "items": {
                        "enum": ["EMAIL", "IBAN", "CREDIT_CARD", "CN_RIC", "IP_ADDRESS", "PHONE"]
                    },
                    "uniqueItems": True,
                },
                "phone_regions": {
                    "type": "array",
                    "items": {"type": "string", "pattern": "^[A-Z]{2}$"},
                },
            },
            fail_closed=False,
        ),
        CheckKind(
            "regex",
            "Regular expressions",
            lambda p, o, r: RegexCheck(
                p["patterns"], ignore_case=bool(p.get("ignore_case", True)), **o
            ),
            {
                "patterns": {
                    "type": "array",
                    "items": {"type": "string", "minLength": 1},
                    "minItems": 1,
                },
                "ignore_case": {"type": "boolean"},
            },
            required=("patterns",),
            fail_closed=False,
        ),
        CheckKind(
            "secrets", "Keys and tokens", lambda p, o, r: SecretsCheck(**o), fail_closed=False
        ),
        CheckKind(
            "prompt_injection",
            "Prompt injection (offline classifier)",
            lambda p, o, r: PromptInjectionCheck(
                threshold=float(p.get("threshold", INJECTION_THRESHOLD)), **o
            ),
            {"threshold": {**_THRESHOLD, "default": INJECTION_THRESHOLD}},
        ),
        CheckKind(
            "decision",
            "Decision-model question",
            _decision,
            {
                "question": {"type": "string", "minLength": 1},
                "flag_choice": {"type": "string", "minLength": 1},
                "choices": {
                    "type": "array",
                    "items": {"type": "string", "minLength": 1},
                    "minItems": 2,
                    "uniqueItems": True,
                },
                "threshold": _THRESHOLD,
                "model": _MODEL,
            },
            required=("question",),
        ),
        CheckKind(
            "topic",
            "Off topic (decision-model question)",
            _topic,
            {"topic": {"type": "string", "minLength": 1}, "threshold": _THRESHOLD, "model": _MODEL},
            required=("topic",),
        ),
    ]
)
