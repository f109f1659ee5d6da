"""A linear classifier in numpy: logistic regression over sparse or dense features.

Rows of features are CSR triples (:class:`Rows`): hashed n-grams are sparse, embeddings dense
(a dense row is a CSR row with every column). Two classes use one weight vector and a sigmoid
(the logit of the second class); more use one vector per class and a softmax. Training is
full-batch Adam on the L2-regularised log loss: deterministic, and fast enough for tens of
thousands of rows (no scikit-learn or scipy needed).

Weights are saved as a ``.npz`` file (``numpy.savez_compressed``, no pickles): ``classes``,
``weights`` (float16, to keep the shipped file small), ``bias`` and ``config`` (JSON text the
owner of the features puts there, so a file says how to make its features).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["LinearClassifier", "Rows", "fit_linear"]

FloatArray = npt.NDArray[np.float32]
IndexArray = npt.NDArray[np.int64]


@dataclass(frozen=True)
class Rows:
    """Feature rows as CSR: row ``i`` holds ``values[indptr[i]:indptr[i+1]]`` at the columns
    ``indices[...]`` of a space of ``dimensions`` columns."""

    indptr: IndexArray
    indices: IndexArray
    values: FloatArray
    dimensions: int

    @property
    def count(self) -> int:
        return len(self.indptr) - 1

    @classmethod
    def stack(cls, rows: Sequence[tuple[IndexArray, FloatArray]], dimensions: int) -> Rows:
        """Rows from ``(indices, values)`` pairs."""
        sizes = np.array([len(i) for i, _ in rows], dtype=np.int64)
        indptr = np.concatenate(([0], np.cumsum(sizes))).astype(np.int64)
        indices = (
            np.concatenate([i for i, _ in rows]).astype(np.int64) if rows else np.zeros(0, np.int64)
        )
        values = (
            np.concatenate([v for _, v in rows]).astype(np.float32)
            if rows
            else np.zeros(0, np.float32)
        )
        return cls(indptr, indices, values, dimensions)

    @classmethod
    def dense(cls, matrix: npt.ArrayLike) -> Rows:
        """Rows from a dense ``(n, d)`` matrix (embeddings)."""
        array = np.asarray(matrix, dtype=np.float32)
        n, d = array.shape
        indptr = np.arange(0, n * d + 1, d, dtype=np.int64)
        indices = np.tile(np.arange(d, dtype=np.int64), n)
        return cls(indptr, indices, array.reshape(-1), d)

    def row_ids(self) -> IndexArray:
        return np.repeat(np.arange(self.count, dtype=np.int64), np.diff(self.indptr))


@dataclass(frozen=True)
class LinearClassifier:
    """Logistic regression: ``classes`` (at least two), ``weights`` (``(1, d)`` for two
    classes, ``(len(classes), d)`` for more), ``bias`` and the features' ``config``."""

    classes: tuple[str, ...]
    weights: FloatArray
    bias: FloatArray
    config: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        expected = 1 if len(self.classes) == 2 else len(self.classes)
        if len(self.classes) < 2 or self.weights.shape[0] != expected:
            raise ValueError(
                f"a classifier over {len(self.classes)} classes needs {expected} weight rows, "
                f"got {self.weights.shape[0]}"
            )

    @property
    def dimensions(self) -> int:
        return int(self.weights.shape[1])

    def logits(self, rows: Rows) -> FloatArray:
        """``(n, rows of weights)`` scores before the sigmoid or softmax."""
        ids = rows.row_ids()
        out = np.empty((rows.count, self.weights.shape[0]), dtype=np.float32)
        for k in range(self.weights.shape[0]):
            contributions = self.weights[k][rows.indices] * rows.values
            out[:, k] = np.bincount(ids, weights=contributions, minlength=rows.count)
        return out + self.bias

    def probabilities(self, rows: Rows) -> FloatArray:
        """``(n, len(classes))`` class probabilities, rows summing to 1."""
        logits = self.logits(rows).astype(np.float64)
        if len(self.classes) == 2:
            positive = 1.0 / (1.0 + np.exp(-logits[:, 0]))
            return np.stack([1.0 - positive, positive], axis=1).astype(np.float32)
        shifted = np.exp(logits - logits.max(axis=1, keepdims=True))
        result: FloatArray = (shifted / shifted.sum(axis=1, keepdims=True)).astype(np.float32)
        return result

    def save(self, path: str | Path) -> None:
        np.savez_compressed(
            path,
            classes=np.array(self.classes),
            weights=self.weights.astype(np.float16),
            bias=self.bias.astype(np.float32),
            config=np.array(json.dumps(dict(self.config), sort_keys=True)),
        )

    @classmethod
    def load(cls, path: str | Path) -> LinearClassifier:
        """Load a file written by :meth:`save` (no pickles are read)."""
        with np.load(path, allow_pickle=False) as data:
            return cls(
                tuple(str(c) for c in data["classes"]),
                data["weights"].astype(np.float32),
                data["bias"].astype(np.float32),
                json.loads(str(data["config"])),
            )


def fit_linear(
    rows: Rows,
    labels: Sequence[str],
    classes: Sequence[str],
    *,
    l2: float = 1e-5,
    epochs: int = 300,
    learning_rate: float = 0.05,
    sample_weights: Sequence[float] | None = None,
    config: Mapping[str, Any] | None = None,
) -> LinearClassifier:
    """Train a :class:`LinearClassifier` on ``rows`` labelled with ``labels`` (each one of
    ``classes``): full-batch Adam on the mean log loss plus ``l2`` times the squared weights.

    ``sample_weights`` scale each row's loss (to balance sources or classes). Deterministic:
    the same inputs give the same weights.
    """
    classes = tuple(classes)
    index = {c: i for i, c in enumerate(classes)}
    unknown = sorted({label for label in labels if label not in index})
    if unknown:
        raise ValueError(f"labels {unknown} are not among the classes {classes}")
    y = np.array([index[label] for label in labels], dtype=np.int64)
    n, d = rows.count, rows.dimensions
    outputs = 1 if len(classes) == 2 else len(classes)
    weights = np.zeros((outputs, d), dtype=np.float64)
    bias = np.zeros(outputs, dtype=np.float64)
    scale = np.ones(n) if sample_weights is None else np.asarray(sample_weights, np.float64)
    scale = scale / scale.sum()
    ids = rows.row_ids()
    values = rows.values.astype(np.float64)
    target = np.zeros((n, outputs))
    if outputs == 1:
        target[:, 0] = y == 1
    else:
        target[np.arange(n), y] = 1.0
    moments = [np.zeros_like(weights), np.zeros_like(weights), np.zeros_like(bias)]
    moments.append(np.zeros_like(bias))
    beta1, beta2, eps = 0.9, 0.999, 1e-8
    for step in range(1, epochs + 1):
        logits = np.empty((n, outputs))
        for k in range(outputs):
            logits[:, k] = np.bincount(ids, weights=weights[k][rows.indices] * values, minlength=n)
        logits += bias
        if outputs == 1:
            predicted = 1.0 / (1.0 + np.exp(-logits))
        else:
            shifted = np.exp(logits - logits.max(axis=1, keepdims=True))
            predicted = shifted / shifted.sum(axis=1, keepdims=True)
        error = (predicted - target) * scale[:, None]
        grad_w = np.empty_like(weights)
        for k in range(outputs):
            grad_w[k] = np.bincount(rows.indices, weights=values * error[ids, k], minlength=d)
        grad_w += 2 * l2 * weights
        grad_b = error.sum(axis=0)
        for param, grad, m, v in ((weights, grad_w, 0, 1), (bias, grad_b, 2, 3)):
            moments[m] = beta1 * moments[m] + (1 - beta1) * grad
            moments[v] = beta2 * moments[v] + (1 - beta2) * grad * grad
            corrected = moments[m] / (1 - beta1**step)
            param -= learning_rate * corrected / (np.sqrt(moments[v] / (1 - beta2**step)) + eps)
    return LinearClassifier(
        classes, weights.astype(np.float32), bias.astype(np.float32), dict(config or {})
    )
