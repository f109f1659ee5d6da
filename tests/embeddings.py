"""Deterministic embedding models for tests: exact vectors by text, bag-of-words otherwise."""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Mapping, Sequence

import numpy as np

WORD = re.compile(r"\w+")


def unit(*components: float, dimensions: int = 384) -> list[float]:
    """A vector with the given leading components, zero-padded to ``dimensions``."""
    values = [*components, *([0.0] * (dimensions - len(components)))]
    norm = math.sqrt(sum(v * v for v in values)) or 1.0
    return [v / norm for v in values]


def at_cosine_distance(distance: float, dimensions: int = 384) -> list[float]:
    """A unit vector whose cosine distance to ``unit(1.0)`` is ``distance``."""
    similarity = 1.0 - distance
    return unit(
        similarity, math.sqrt(max(0.0, 1.0 - similarity * similarity)), dimensions=dimensions
    )


class WordEmbeddingModel:
    """``EmbeddingModel`` for tests: texts in ``table`` get their vector; others bag-of-words.

    A bag-of-words vector is the normalised sum of one fixed pseudo-random vector per
    lower-cased word, so texts that share words are near each other. ``calls`` records every
    batch of texts embedded.
    """

    def __init__(
        self, table: Mapping[str, Sequence[float]] | None = None, dimensions: int = 384
    ) -> None:
        self.table = dict(table or {})
        self._dimensions = dimensions
        self.calls: list[list[str]] = []

    @property
    def dimensions(self) -> int:
        return self._dimensions

    def _word(self, word: str) -> np.ndarray:
        seed = int.from_bytes(hashlib.sha256(word.encode()).digest()[:8], "big")
        return np.random.default_rng(seed).standard_normal(self._dimensions)

    def vector(self, text: str) -> list[float]:
        if text in self.table:
            return list(self.table[text])
        total = np.zeros(self._dimensions)
        for word in WORD.findall(text.lower()):
            total += self._word(word)
        norm = np.linalg.norm(total)
        if not norm:
            total[0], norm = 1.0, 1.0
        return (total / norm).tolist()

    def embed_sync(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls.append(list(texts))
        return [self.vector(t) for t in texts]

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return self.embed_sync(texts)
