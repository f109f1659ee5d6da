"""``Decision`` and ``DecisionModel``: a typed answer to a question about a text.

Spring AI 2.1's ``DecisionModel`` (``org.springframework.ai.decision``): instead of free text, a
decision model picks one of a few known answers ("yes"/"no", a category) and says how likely
each is, so the caller decides how sure it must be before acting. Our shape is smaller than
Spring's (one question per call, choices as plain strings): see :class:`DecisionModel`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .._sync import run_sync
from ..mappings import EMPTY, freeze

__all__ = ["YES_NO", "Decision", "DecisionError", "DecisionModel", "checked_choices"]

#: The choices of a yes/no question, the default of :meth:`DecisionModel.decide`.
YES_NO: tuple[str, str] = ("yes", "no")


class DecisionError(RuntimeError):
    """Raised when a decision model cannot answer: the chat model's reply names no choice."""


@dataclass(frozen=True, slots=True)
class Decision:
    """The answer to one question: the ``choice`` picked and its ``probability`` (0..1).

    ``probabilities`` maps every choice to its probability when the backend knows them (they
    sum to 1); ``source`` says how the answer was reached (``"logprobs"``, ``"json"``,
    ``"classifier"``), for traces and evaluation.
    """

    choice: str
    probability: float
    probabilities: Mapping[str, float] = field(default=EMPTY)
    source: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "probabilities", freeze(self.probabilities))

    def probability_of(self, choice: str) -> float:
        """The probability of ``choice`` (0.0 for one the backend gave none)."""
        if choice == self.choice:
            return self.probability
        return float(self.probabilities.get(choice, 0.0))

    def to_dict(self) -> dict[str, Any]:
        return {
            "choice": self.choice,
            "probability": round(self.probability, 6),
            "probabilities": {k: round(float(v), 6) for k, v in self.probabilities.items()},
            "source": self.source,
        }


def checked_choices(choices: Sequence[str] | None) -> tuple[str, ...]:
    """``choices`` as a tuple (:data:`YES_NO` for ``None``); ``ValueError`` unless it holds at
    least two distinct, non-blank strings."""
    if choices is None:
        return YES_NO
    if isinstance(choices, str):
        raise ValueError("choices must be a sequence of strings, not one string")
    picked = tuple(choices)
    if len(picked) < 2 or len(set(picked)) != len(picked):
        raise ValueError(f"choices must hold at least two distinct answers, got {picked!r}")
    if any(not isinstance(c, str) or not c.strip() for c in picked):
        raise ValueError(f"choices must be non-blank strings, got {picked!r}")
    return picked


class DecisionModel(ABC):
    """Answers a question about a text with one of a few choices and its probability.

    ``await model.decide("Is this about Python?", text)`` → ``Decision("yes", 0.93)``;
    ``choices`` defaults to :data:`YES_NO`. ``decide_sync`` is the blocking twin (not from a
    running event loop). Implementations: :class:`~.chat.ChatDecisionModel` (any chat model:
    token log-probabilities, else constrained JSON) and
    :class:`~.classifier.ClassifierDecisionModel` (a small trained classifier over
    embeddings or hashed n-grams, offline and fast).

    Divergences from Spring AI 2.1: one question per call (Spring asks several named
    questions in one ``DecisionPrompt``); no "score" question type; the choices are strings.
    """

    @abstractmethod
    async def decide(
        self, question: str, text: str, choices: Sequence[str] | None = None
    ) -> Decision:
        """The answer to ``question`` about ``text``, one of ``choices`` (default yes/no)."""

    def decide_sync(
        self, question: str, text: str, choices: Sequence[str] | None = None
    ) -> Decision:
        """Blocking twin of :meth:`decide`."""
        return run_sync(self.decide(question, text, choices))
