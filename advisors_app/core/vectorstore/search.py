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
    "RRF_K_MAX",
    "SEARCH_MODES",
    "SIMILARITY_THRESHOLD_ACCEPT_ALL",
    "WEIGHT_MAX",
    "SearchRequest",
]

#: Spring AI ``SearchRequest.DEFAULT_TOP_K``.
DEFAULT_TOP_K = 4
#: Spring AI ``SearchRequest.SIMILARITY_THRESHOLD_ACCEPT_ALL``: no similarity cut-off.
SIMILARITY_THRESHOLD_ACCEPT_ALL = 0.0
#: Bounds of ``SearchRequest.ef_search`` (candidates an HNSW search keeps).
EF_SEARCH_MIN = 10
EF_SEARCH_MAX = 1000
#: ``SearchRequest.search_mode`` values: embeddings, full text, or both fused.
SEARCH_MODES = ("vector", "lexical", "hybrid")
#: Bounds of the hybrid fusion parameters: weights in [0, WEIGHT_MAX], ``rrf_k`` in [1, RRF_K_MAX].
WEIGHT_MAX = 10.0
RRF_K_MAX = 1000


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

    ``search_mode`` (our addition, as the next three): ``"vector"`` (embeddings),
    ``"lexical"`` (full text) or ``"hybrid"`` (both rankings fused by weighted reciprocal rank:
    ``vector_weight / (rrf_k + vector rank) + lexical_weight / (rrf_k + lexical rank)``);
    ``None`` is the store's default. Stores without a full-text index search by vector
    whatever the mode. Weights are in [0, 10], ``rrf_k`` in [1, 1000]; ``None``: the store's.

    Raises ``ValueError`` with Spring's messages ("Similarity threshold must be in [0,1]
    range.", "TopK should be positive.") or naming the invalid filter. Divergence: ``top_k=0``
    is refused (Spring accepts it and then silently retrieves nothing, defect 5.6.46).
    """

    query: str = ""
    top_k: int = DEFAULT_TOP_K
    similarity_threshold: float = SIMILARITY_THRESHOLD_ACCEPT_ALL
    filter_expression: Filter | None = None
    ef_search: int | None = None
    search_mode: str | None = None
    vector_weight: float | None = None
    lexical_weight: float | None = None
    rrf_k: int | None = None

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
        if self.search_mode is not None and self.search_mode not in SEARCH_MODES:
            raise ValueError(f"search_mode must be one of {', '.join(SEARCH_MODES)}.")
        for name in ("vector_weight", "lexical_weight"):
            weight = getattr(self, name)
            if weight is not None and (
                isinstance(weight, bool)
                or not isinstance(weight, (int, float))
                or not math.isfinite(weight)
                or not 0.0 <= weight <= WEIGHT_MAX
            ):
                raise ValueError(f"{name} must be a number in [0, {WEIGHT_MAX:g}].")
        k = self.rrf_k
        if k is not None and (
            isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= RRF_K_MAX
        ):
            raise ValueError(f"rrf_k must be an integer in [1, {RRF_K_MAX}].")
        object.__setattr__(self, "filter_expression", resolve_filter(self.filter_expression))

    @property
    def has_filter_expression(self) -> bool:
        return self.filter_expression is not None

    def mutate(self, **changes: Any) -> SearchRequest:
        """A copy with ``changes`` applied (Spring AI ``SearchRequest.from(request)``)."""
        return dataclasses.replace(self, **changes)
