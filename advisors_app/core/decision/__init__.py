"""Decision models: typed answers with probabilities (Spring AI 2.1's ``DecisionModel``).

``await model.decide("Is this about Python?", text)`` → ``Decision("yes", 0.93)``. Backends:
:class:`ChatDecisionModel` (any chat model: token log-probabilities, else constrained JSON) and
:class:`ClassifierDecisionModel` (a small classifier trained on labelled examples, over hashed
n-grams or an embedding model's vectors: offline and fast). The shipped prompt-injection
classifier is :func:`prompt_injection_classifier`.
"""

from __future__ import annotations

from .base import YES_NO, Decision, DecisionError, DecisionModel, checked_choices
from .chat import ChatDecisionModel
from .classifier import ClassifierDecisionModel, Windows, train_classifier
from .features import EmbeddingFeatures, Features, HashedNgramFeatures, features_from_config
from .injection import (
    ATTACK,
    BENIGN,
    INJECTION_THRESHOLD,
    PROMPT_INJECTION_QUESTION,
    prompt_injection_classifier,
)
from .linear import LinearClassifier, Rows, fit_linear

__all__ = [
    "ATTACK",
    "BENIGN",
    "INJECTION_THRESHOLD",
    "PROMPT_INJECTION_QUESTION",
    "YES_NO",
    "ChatDecisionModel",
    "ClassifierDecisionModel",
    "Decision",
    "DecisionError",
    "DecisionModel",
    "EmbeddingFeatures",
    "Features",
    "HashedNgramFeatures",
    "LinearClassifier",
    "Rows",
    "Windows",
    "checked_choices",
    "features_from_config",
    "fit_linear",
    "prompt_injection_classifier",
    "train_classifier",
]
