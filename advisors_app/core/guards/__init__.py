"""Guard checks and their registry, for :class:`~advisors_app.core.advisors.guard.GuardAdvisor`."""

from __future__ import annotations

from .checks import (
    REDACTED,
    DecisionCheck,
    Finding,
    GuardCheck,
    PiiCheck,
    PromptInjectionCheck,
    RegexCheck,
    SecretsCheck,
    TopicCheck,
    WordsCheck,
)
from .registry import COMMON_PARAMS, CheckKind, CheckResources, GuardCheckRegistry, guard_checks
from .secrets import SECRET_MARKER, find_secrets, redact_secrets

__all__ = [
    "COMMON_PARAMS",
    "REDACTED",
    "SECRET_MARKER",
    "CheckKind",
    "CheckResources",
    "DecisionCheck",
    "Finding",
    "GuardCheck",
    "GuardCheckRegistry",
    "PiiCheck",
    "PromptInjectionCheck",
    "RegexCheck",
    "SecretsCheck",
    "TopicCheck",
    "WordsCheck",
    "find_secrets",
    "guard_checks",
    "redact_secrets",
]
