"""``Document``: a piece of text with metadata, the unit a vector store keeps and returns.

Spring AI ``org.springframework.ai.document.Document``.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..mappings import EMPTY, freeze, merged

__all__ = ["DISTANCE", "RETRIEVAL", "SCORE", "Document"]

#: Metadata key of a search result's cosine *distance* (0 = same direction, 2 = opposite).
DISTANCE = "distance"
#: Metadata key of a search result's cosine *similarity* (= ``1 - distance``), as ``score``.
SCORE = "score"
#: Metadata key of how a lexical or hybrid search found a result, a dict: ``mode``,
#: ``vector_rank`` and ``lexical_rank`` (1-based rank in each leg's list, ``None`` when that leg
#: did not find it), ``fused_score`` (the weighted reciprocal rank sum) and, after reranking,
#: ``rerank_score``.
RETRIEVAL = "retrieval"


@dataclass(frozen=True, slots=True)
class Document:
    """Immutable text plus metadata; ``id`` defaults to a random UUID string.

    ``score`` is set on search results only: the cosine **similarity** to the query
    (``1 - cosine distance``, 1.0 for the same direction); stores also put it in
    ``metadata["score"]`` and the cosine distance in ``metadata["distance"]``. ``metadata``
    values should be JSON values (strings, numbers, booleans, lists, objects) so every store
    can keep and filter them. Raises ``ValueError`` when ``text`` is not a string.
    """

    text: str
    metadata: Mapping[str, Any] = field(default=EMPTY)
    id: str = field(default=None)  # type: ignore[assignment]
    score: float | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.text, str):
            raise ValueError("text cannot be null")
        object.__setattr__(self, "metadata", freeze(self.metadata))
        if self.id is None:
            object.__setattr__(self, "id", str(uuid.uuid4()))
        elif not isinstance(self.id, str) or not self.id:
            raise ValueError("id must be a non-empty string")

    def __hash__(self) -> int:
        return hash((self.id, self.text))

    def mutate(self, **changes: Any) -> Document:
        """A copy with ``changes`` applied (``text=``, ``metadata=``, ``score=``...)."""
        return dataclasses.replace(self, **changes)

    def with_metadata(self, entries: Mapping[str, Any]) -> Document:
        """A copy whose metadata has ``entries`` merged in."""
        return dataclasses.replace(self, metadata=merged(self.metadata, entries))

    def to_dict(self) -> dict[str, Any]:
        """A JSON-compatible dict (``id``, ``text``, ``metadata``, ``score``)."""
        return {
            "id": self.id,
            "text": self.text,
            "metadata": dict(self.metadata),
            "score": self.score,
        }
