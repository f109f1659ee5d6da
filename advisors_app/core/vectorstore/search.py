"""``SearchRequest``: what to look for in a vector store (Spring AI ``SearchRequest``)."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from .filters import Filter
from .parser import resolve_filter

__all__ = [
    "DEFAULT_TOP_K",
    "EF_SEARCH_MAX",
    "EF_SEARCH_MIN",
    "SIMILARITY_THRESHOLD_ACCEPT_ALL",
    "SearchRequest",
]

#: Spring AI ``SearchRequest.DEFAULT_TOP_K``.
DEFAULT_TOP_K = 4
#: Spring AI ``SearchRequest.SIMILARITY_THRESHOLD_ACCEPT_ALL``: no similarity cut-off.
SIMILARITY_THRESHOLD_ACCEPT_ALL = 0.0
#: Bounds of ``SearchRequest.ef_search`` (candidates an HNSW search keeps).
EF_SEARCH_MIN = 10
EF_SEARCH_MAX = 1000


@dataclass(frozen=True, slots=True)
class SearchRequest:
    """A similarity search: query text, how many results, a cut-off and a metadata filter.

    ``top_k`` is the most documents returned (≥ 1). ``similarity_threshold`` is a cosine
    **similarity** in [0, 1]: only documents with ``score = 1 - cosine distance`` at or above it
    are returned; ``0.0`` accepts everything (even opposite vectors). ``filter_expression`` is a
    :class:`~.filters.Filter` or Spring filter text (parsed here; blank text means no filter).
    ``ef_search`` (divergence: not in Spring AI) asks an approximate (HNSW) store to keep that
    many candidates per index search, in [10, 1000]: higher finds more of the true neighbours
    and costs more; ``None`` is the store's default and exact stores ignore it.

    Raises ``ValueError`` with Spring's messages ("Similarity threshold must be in [0,1]
    range.", "TopK should be positive.") or naming the invalid filter. Divergence: ``top_k=0``
    is refused (Spring accepts it and then silently retrieves nothing, defect 5.6.46).
    """

    query: str = ""
    top_k: int = DEFAULT_TOP_K
    similarity_threshold: float = SIMILARITY_THRESHOLD_ACCEPT_ALL
    filter_expression: Filter | None = None
    ef_search: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.query, str):
            raise ValueError("Query can not be null.")
        if isinstance(self.top_k, bool) or not isinstance(self.top_k, int) or self.top_k < 1:
            raise ValueError("TopK should be positive.")
        threshold = self.similarity_threshold
        if (
            isinstance(threshold, bool)
            or not isinstance(threshold, (int, float))
            or not math.isfinite(threshold)
            or not 0.0 <= threshold <= 1.0
        ):
            raise ValueError("Similarity threshold must be in [0,1] range.")
        object.__setattr__(self, "similarity_threshold", float(threshold))
        ef = self.ef_search
        if ef is not None and (
            isinstance(ef, bool)
            or not isinstance(ef, int)
            or not EF_SEARCH_MIN <= ef <= EF_SEARCH_MAX
        ):
            raise ValueError(f"ef_search must be an integer in [{EF_SEARCH_MIN}, {EF_SEARCH_MAX}].")
        object.__setattr__(self, "filter_expression", resolve_filter(self.filter_expression))

    @property
    def has_filter_expression(self) -> bool:
        return self.filter_expression is not None

    def mutate(self, **changes: Any) -> SearchRequest:
        """A copy with ``changes`` applied (Spring AI ``SearchRequest.from(request)``)."""
        return dataclasses.replace(self, **changes)
