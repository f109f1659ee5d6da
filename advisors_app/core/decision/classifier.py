"""``ClassifierDecisionModel``: a small trained classifier answers one question, offline.

The fast backend of :class:`~.base.DecisionModel`: :class:`~.features.Features` (hashed n-grams
or an embedding model's vectors) and a :class:`~.linear.LinearClassifier` trained on labelled
examples (:func:`train_classifier`). It needs no chat model and, with hashed n-grams, no model
at all. A classifier is trained for one question: its classes are its choices.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .base import Decision, DecisionModel
from .features import Features, features_from_config
from .linear import LinearClassifier, Rows, fit_linear

__all__ = ["ClassifierDecisionModel", "Windows", "train_classifier"]

#: Source of a classifier's decisions (:attr:`Decision.source`).
CLASSIFIER = "classifier"


@dataclass(frozen=True, slots=True)
class Windows:
    """Overlapping windows a long text is read in: ``size`` characters every ``stride``.

    A binary classifier answers with its most positive window, so one instruction hidden in
    a long document is judged on its own rather than averaged away. Any span of up to
    ``size - stride`` characters lies wholly inside some window.
    """

    size: int = 400
    stride: int = 200

    def __post_init__(self) -> None:
        if not 0 < self.stride <= self.size:
            raise ValueError(f"windows need 0 < stride <= size, got {self.stride}, {self.size}")

    def split(self, text: str) -> list[str]:
        if len(text) <= self.size:
            return [text]
        last = max(len(text) - self.size, 0)
        starts = [*range(0, last, self.stride), last]
        return [text[s : s + self.size] for s in starts]


class ClassifierDecisionModel(DecisionModel):
    """Answers ``question`` with a trained classifier (a :class:`DecisionModel`).

    The classifier's classes are the only choices: ``choices`` given to :meth:`decide` must be
    the same set (any order), else ``ValueError``; the ``question`` argument is not read (the
    classifier was trained for :attr:`question`). Two classes: ``positive`` (default the
    second class) is chosen when its probability reaches ``threshold``, judged on the text's
    most positive window (:class:`Windows`, ``windows=None`` reads the text whole) and on each
    extra view ``views(text)`` returns (a decoded base64 payload, say). More classes: the most
    probable class of the whole text.
    """

    def __init__(
        self,
        features: Features,
        classifier: LinearClassifier,
        *,
        question: str = "",
        positive: str | None = None,
        threshold: float = 0.5,
        windows: Windows | None = Windows(),
        views: Callable[[str], list[str]] | None = None,
    ) -> None:
        if features.dimensions != classifier.dimensions:
            raise ValueError(
                f"features have {features.dimensions} columns, the classifier "
                f"{classifier.dimensions}"
            )
        binary = len(classifier.classes) == 2
        if positive is not None and positive not in classifier.classes:
            raise ValueError(f"positive {positive!r} is not a class of {classifier.classes}")
        self.features = features
        self.classifier = classifier
        self.question = question
        self.positive = (positive or classifier.classes[1]) if binary else None
        self.threshold = threshold
        self.windows = windows if binary else None
        self.views = views if binary else None

    @classmethod
    def load(cls, path: str | Path, **kwargs: object) -> ClassifierDecisionModel:
        """A model from a weights file (:meth:`LinearClassifier.save`) with hashed n-gram
        features; keyword arguments as the constructor's (``embedding_model`` for weights
        over embeddings)."""
        classifier = LinearClassifier.load(path)
        embedding_model = kwargs.pop("embedding_model", None)
        features = features_from_config(classifier.config, embedding_model)  # type: ignore[arg-type]
        return cls(features, classifier, **kwargs)  # type: ignore[arg-type]

    @property
    def choices(self) -> tuple[str, ...]:
        return self.classifier.classes

    def _check(self, choices: Sequence[str] | None) -> None:
        if choices is not None and set(choices) != set(self.classifier.classes):
            raise ValueError(
                f"this classifier answers only {list(self.classifier.classes)}, not {list(choices)}"
            )

    def _texts(self, text: str) -> list[str]:
        return [text, *(self.views(text) if self.views else ())]

    def _windowed(self, text: str) -> Rows | None:
        """The rows of every window when the features can make them in one pass."""
        make = getattr(self.features, "windowed_rows", None)
        if self.windows is None or make is None:
            return None
        rows: Rows = make(self._texts(text), self.windows.size, self.windows.stride)
        return rows

    def _pieces(self, text: str) -> list[str]:
        texts = self._texts(text)
        if self.windows is None:
            return texts
        return [piece for t in texts for piece in self.windows.split(t)]

    def _decision(
        self, probabilities: np.ndarray[tuple[int, int], np.dtype[np.float32]]
    ) -> Decision:
        classes = self.classifier.classes
        if self.positive is not None:
            column = classes.index(self.positive)
            row = int(np.argmax(probabilities[:, column]))
            p = float(probabilities[row, column])
            other = classes[1 - column]
            choice = self.positive if p >= self.threshold else other
            by_class = {self.positive: p, other: 1.0 - p}
            return Decision(choice, by_class[choice], by_class, CLASSIFIER)
        best = int(np.argmax(probabilities[0]))
        by_class = {c: float(probabilities[0, i]) for i, c in enumerate(classes)}
        return Decision(classes[best], by_class[classes[best]], by_class, CLASSIFIER)

    async def decide(
        self, question: str, text: str, choices: Sequence[str] | None = None
    ) -> Decision:
        self._check(choices)
        rows = self._windowed(text) or await self.features.rows(self._pieces(text))
        return self._decision(self.classifier.probabilities(rows))

    def decide_sync(
        self, question: str, text: str, choices: Sequence[str] | None = None
    ) -> Decision:
        self._check(choices)
        rows = self._windowed(text) or self.features.rows_sync(self._pieces(text))
        return self._decision(self.classifier.probabilities(rows))


def train_classifier(
    features: Features,
    texts: Sequence[str],
    labels: Sequence[str],
    classes: Sequence[str],
    *,
    sample_weights: Sequence[float] | None = None,
    l2: float = 1e-5,
    epochs: int = 300,
) -> LinearClassifier:
    """A classifier over ``features`` of ``texts`` labelled ``labels`` (each one of
    ``classes``); the weights carry the features' config, so
    :meth:`ClassifierDecisionModel.load` rebuilds them. See :func:`~.linear.fit_linear`."""
    rows: Rows = features.rows_sync(texts)
    return fit_linear(
        rows,
        labels,
        classes,
        l2=l2,
        epochs=epochs,
        sample_weights=sample_weights,
        config=features.config(),
    )
