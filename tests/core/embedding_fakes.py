"""A deterministic embedding model for tests: bag of words hashed into 384 dimensions."""

from __future__ import annotations

import hashlib
import math
import re


class HashingEmbeddingModel:
    """Texts with the same words get the same unit vector; shared words raise cosine similarity.

    ``calls`` counts ``embed`` invocations and ``texts`` records every text embedded.
    """

    def __init__(self, dimensions: int = 384) -> None:
        self.dimensions = dimensions
        self.calls = 0
        self.texts: list[str] = []

    async def embed(self, texts):
        self.calls += 1
        self.texts.extend(texts)
        vectors = []
        for text in texts:
            vector = [0.0] * self.dimensions
            for word in re.findall(r"[a-z0-9]+", text.lower()):
                slot = int(hashlib.sha256(word.encode()).hexdigest(), 16) % self.dimensions
                vector[slot] += 1.0
            norm = math.sqrt(sum(v * v for v in vector)) or 1.0
            vectors.append([v / norm for v in vector])
        return vectors
