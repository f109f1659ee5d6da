"""Lexical and hybrid search for :class:`~advisors_app.stores.vectors.PgVectorStore`, in SQL.

The lexical index is the ``search_vector`` column (a ``tsvector`` with a GIN index) that
:func:`~advisors_app.models.documents.lexical_vector` gives every row, from its text and its
context line:

* the context line in the collection's text search configuration, weight ``B``;
* the text, and the last parts of its dotted names (``casefold`` of ``str.casefold``, which
  the parser reads as one host name), in that configuration, weight ``D``;
* every identifier holding ``_`` or ``.`` as one exact token
  (:func:`~advisors_app.core.vectorstore.lexical.exact_term`) in the ``simple``
  configuration, weight ``A``: ``co_varnames`` matches ``co_varnames``, not ``co_names``.

A query goes through the same split and becomes an OR of its lexemes (a question's words are
not all in the chunk that answers it) — its rarest ones, within :data:`LEXICAL_BUDGET_ROWS` —
ranked by ``ts_rank`` (the weights above, length
normalisation 1). :func:`search_sql` writes the one statement a lexical or hybrid search runs:
the query as a CTE, each leg as a CTE built from the same ORM queryset — so the owner scope, the
chain's filter and the caller's filter are in both — and the fusion
``vector_weight / (rrf_k + vector rank) + lexical_weight / (rrf_k + lexical rank)``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db.models import BooleanField, FloatField, QuerySet
from django.db.models.expressions import RawSQL

from advisors_app.core.vectorstore.lexical import lexical_text
from advisors_app.models.documents import HNSW_VECTOR_LIMIT, cosine_distance

__all__ = ["LEXICAL_BUDGET_ROWS", "LEXICAL_COLUMNS", "HybridParams", "search_sql"]

#: Candidates each leg contributes at least (the fusion sees up to twice as many).
DEPTH = 20
#: Columns of the rows :func:`search_sql` returns, in order.
LEXICAL_COLUMNS = ("pk", "content", "metadata", "distance", "vector_rank", "lexical_rank", "fused")

_TABLE = '"advisors_app_document"'
#: The lexical leg's query keeps the rarest of the question's lexemes while, by the column's
#: statistics, the rows holding them add up to at most this many (the rarest one always):
#: "return" or "object" would make it rank thousands of rows at 100,000 chunks — a heap page
#: read for each — while the vector leg finds what such words say. A table this small keeps
#: every lexeme, and so does one without statistics (no ANALYZE yet).
LEXICAL_BUDGET_ROWS = 1000
# The query's lexemes, rarest first by the statistics PostgreSQL keeps for the column
# (``most_common_elems``: frequencies of the commonest lexemes, then their minimum, a bound for
# every other lexeme), kept within the budget, ORed; every lexeme quoted for tsquery input
# ('' for a quote, \\ for a backslash), so nothing a user types is read as an operator.
_QUERY_CTE = (
    "lexical_query AS MATERIALIZED (WITH asked AS (SELECT DISTINCT lexeme "
    "FROM unnest(tsvector_to_array(to_tsvector(%s::regconfig, %s) || "
    "to_tsvector('simple', %s))) AS lexeme), "
    "stats AS (SELECT most_common_elems::text::text[] AS elems, "
    "most_common_elem_freqs AS freqs FROM pg_stats WHERE schemaname = current_schema() "
    "AND tablename = 'advisors_app_document' AND attname = 'search_vector'), "
    "rated AS (SELECT a.lexeme, coalesce("
    "(SELECT s.freqs[array_position(s.elems, a.lexeme)] FROM stats AS s), "
    "(SELECT s.freqs[array_length(s.elems, 1) + 1] FROM stats AS s), 0) AS share "
    "FROM asked AS a), "
    "ranked AS (SELECT lexeme, share, "
    "sum(share) OVER (ORDER BY share, lexeme) - share AS before FROM rated) "
    "SELECT (SELECT string_agg('''' || replace(replace(lexeme, '\\', '\\\\'), '''', "
    "'''''') || '''', ' | ') FROM ranked WHERE before = 0 OR before + share <= %s / "
    "(SELECT greatest(reltuples, 1) FROM pg_class "
    "WHERE oid = 'advisors_app_document'::regclass))::tsquery AS query)"
)
_MATCH = f'{_TABLE}."search_vector" @@ (SELECT query FROM lexical_query)'
_RANK = f'ts_rank({_TABLE}."search_vector", (SELECT query FROM lexical_query), 1)'


class HybridParams:
    """What one lexical or hybrid search runs with (resolved request and collection values)."""

    __slots__ = (
        "budget_rows",
        "config",
        "depth",
        "lexical_weight",
        "mode",
        "rrf_k",
        "top_k",
        "vector_weight",
    )

    def __init__(
        self,
        *,
        mode: str,
        config: str,
        top_k: int,
        vector_weight: float,
        lexical_weight: float,
        rrf_k: int,
        budget_rows: int = LEXICAL_BUDGET_ROWS,
    ) -> None:
        self.mode = mode
        self.config = config
        self.top_k = top_k
        self.depth = max(top_k, DEPTH)
        self.vector_weight = float(vector_weight)
        self.lexical_weight = float(lexical_weight)
        self.rrf_k = int(rrf_k)
        self.budget_rows = budget_rows


def _vector_sql(vector: Sequence[float], dimensions: int) -> tuple[str, list[Any]]:
    literal = "[" + ",".join(repr(float(v)) for v in vector) + "]"
    if dimensions <= HNSW_VECTOR_LIMIT:
        return 'd."embedding" <=> %s::vector', [literal]
    cast = f"halfvec({dimensions})"
    return f'd."embedding"::{cast} <=> %s::{cast}', [literal]


def search_sql(
    rows: QuerySet[Any],
    query: str,
    vector: Sequence[float],
    dimensions: int,
    params: HybridParams,
) -> tuple[str, list[Any]]:
    """The one statement of a lexical or hybrid search over ``rows`` (the store's scope and
    filters), returning :data:`LEXICAL_COLUMNS` for the best ``params.top_k`` by fused score.

    ``vector`` is the query's embedding (the vector leg, and every result's cosine distance
    so that scores mean the same in every mode). In ``lexical`` mode the vector leg is left
    out and the lexical rank alone orders the rows.
    """
    text = lexical_text(query)
    sql_params: list[Any] = [params.config, text.words, text.exact, params.budget_rows]
    ctes = [_QUERY_CTE]
    lexical = (
        rows.filter(RawSQL(_MATCH, [], output_field=BooleanField()))
        .annotate(lexical_score=RawSQL(_RANK, [], output_field=FloatField()))
        .order_by("-lexical_score", "pk")
        .values_list("pk", "lexical_score")[: params.depth]
    )
    lexical_sql, lexical_params = lexical.query.sql_with_params()
    ctes.append(
        "lexical_leg AS (SELECT pk, row_number() OVER (ORDER BY score DESC, pk) AS rank "
        f"FROM ({lexical_sql}) AS leg (pk, score))"
    )
    sql_params += list(lexical_params)
    weights = "%s::float8 / (%s + l.rank)"
    fused_params: list[Any] = [params.lexical_weight, params.rrf_k]
    if params.mode == "hybrid":
        nearest = (
            rows.annotate(distance=cosine_distance("embedding", dimensions, vector))
            .order_by("distance")
            .values_list("pk", "distance")[: params.depth]
        )
        vector_sql, vector_params = nearest.query.sql_with_params()
        ctes.append(
            "vector_leg AS (SELECT pk, row_number() OVER (ORDER BY distance, pk) AS rank "
            f"FROM ({vector_sql}) AS leg (pk, distance))"
        )
        sql_params += list(vector_params)
        ctes.append(
            "fused AS (SELECT coalesce(v.pk, l.pk) AS pk, v.rank AS vector_rank, "
            "l.rank AS lexical_rank, coalesce(%s::float8 / (%s + v.rank), 0) + "
            f"coalesce({weights}, 0) AS score "
            "FROM vector_leg AS v FULL JOIN lexical_leg AS l ON v.pk = l.pk)"
        )
        sql_params += [params.vector_weight, params.rrf_k, *fused_params]
    else:
        ctes.append(
            "fused AS (SELECT l.pk AS pk, NULL::bigint AS vector_rank, l.rank AS lexical_rank, "
            f"{weights} AS score FROM lexical_leg AS l)"
        )
        sql_params += fused_params
    distance_sql, distance_params = _vector_sql(vector, dimensions)
    sql = (
        "WITH " + ", ".join(ctes) + " "
        f'SELECT d."id", d."content", d."metadata", {distance_sql} AS distance, '
        "f.vector_rank, f.lexical_rank, f.score "
        f'FROM fused AS f JOIN {_TABLE} AS d ON d."id" = f.pk '
        'ORDER BY f.score DESC, f.vector_rank NULLS LAST, d."id" LIMIT %s'
    )
    return sql, [*sql_params, *distance_params, params.top_k]
