"""``PgVectorStore``: the ``VectorStore`` contract on PostgreSQL + pgvector through the ORM.

Spring AI ``PgVectorStore``, re-done on Django: documents are :class:`advisors_app.models.Document`
rows of one :class:`~advisors_app.models.Collection`; search is ``ORDER BY embedding <=> query
LIMIT top_k`` on the HNSW cosine index. Divergences, each a fix:

* **scores are similarities**: ``score = 1 - cosine distance`` and ``similarity_threshold``
  keeps ``distance <= 1 - threshold`` (Spring issue #30, bug case B25); 0.0 accepts everything;
  every result carries ``metadata["score"]`` and ``metadata["distance"]``;
* **filtered searches use an index and still fill top_k**: a filter keeping at most
  ``EXACT_BELOW`` rows is searched exactly over the rows the metadata GIN index finds (labelled
  exact); otherwise HNSW runs with ``hnsw.iterative_scan = relaxed_order`` (pgvector ≥ 0.8;
  the rows are re-sorted) and ``enable_sort = off``, so the planner takes the index even when
  it guesses a JSON filter keeps few rows; when fewer than ``top_k`` rows come back the search
  is repeated exactly (no index) and :meth:`PgVectorStore.search_vector` says so;
  ``hnsw.ef_search`` comes from the request, else the collection, else 40 (see
  ``docs/retrieval.md``);
* **filters never become SQL text**: the expression tree is compiled to ORM ``Q`` objects over
  the JSON metadata with every key and value bound as a parameter (see :func:`compile_filter`);
* **a server-side scope is always ANDed in**: the collection, the visible owners (shared rows
  and the user's own) and an optional tenant; caller filters only see metadata and cannot
  widen it;
* **dimension mismatches are refused up front** with :class:`EmbeddingDimensionError` naming
  both sizes, never as a driver error mid-request (bug case B24);
* **lexical and hybrid search** (not in Spring AI): ``SearchRequest.search_mode`` (else the
  collection's) ``lexical`` searches the full-text index, ``hybrid`` runs both legs in one
  statement fused by weighted reciprocal rank (:mod:`advisors_app.stores.hybrid`); results
  say which leg found them in ``metadata["retrieval"]``, and ``score`` stays the cosine
  similarity in every mode.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any, ClassVar, NamedTuple

from django.contrib.auth.models import AnonymousUser
from django.core.exceptions import PermissionDenied
from django.db import connection, transaction
from django.db.models import CharField, F, Func, JSONField, Q, TextField, Value
from django.db.models.functions import Coalesce, Collate
from django.db.models.lookups import (
    Exact,
    GreaterThan,
    GreaterThanOrEqual,
    LessThan,
    LessThanOrEqual,
)

from advisors_app.core._sync import run_sync
from advisors_app.core.model import EmbeddingModel
from advisors_app.core.vectorstore import (
    DISTANCE,
    RETRIEVAL,
    SCORE,
    And,
    Document,
    EmbeddingDimensionError,
    Eq,
    Filter,
    Gt,
    Gte,
    In,
    IsNotNull,
    IsNull,
    Lt,
    Lte,
    Ne,
    Nin,
    Not,
    Or,
    SearchRequest,
    VectorStore,
)
from advisors_app.core.vectorstore.base import (
    as_search_request,
    check_documents,
    split_delete_target,
)
from advisors_app.core.vectorstore.filters import Comparison, json_kind
from advisors_app.core.vectorstore.search import EF_SEARCH_MAX
from advisors_app.db.threads import db_sync_to_async
from advisors_app.models import Collection
from advisors_app.models import Document as DocumentRow
from advisors_app.models.documents import content_hash, cosine_distance, lexical_vector
from advisors_app.stores.hybrid import LEXICAL_BUDGET_ROWS, HybridParams, search_sql

__all__ = [
    "DEFAULT_EF_SEARCH",
    "PgVectorStore",
    "VectorSearch",
    "compile_filter",
    "default_embedding_model",
]

EMBED_BATCH_SIZE = 64
#: pgvector's own ``hnsw.ef_search`` default, used when neither request nor collection sets one.
DEFAULT_EF_SEARCH = 40
#: A filter keeping at most this many rows of the scope is searched exactly: the metadata index
#: finds them and computing their distances is faster than an HNSW scan that must pass over
#: ~1/selectivity candidates per match (100k rows, 1% filter: the scan reaches
#: ``hnsw.max_scan_tuples`` and still falls back to exact search).
EXACT_BELOW = 2000
_ORDERED = {Gt: GreaterThan, Gte: GreaterThanOrEqual, Lt: LessThan, Lte: LessThanOrEqual}


def default_embedding_model() -> EmbeddingModel:
    """The offline default: all-MiniLM-L6-v2 (384 dimensions), loaded once per process."""
    from advisors_app.core.providers.embedded_minilm import MiniLmEmbeddingModel

    return MiniLmEmbeddingModel()


def _json_at(key: str) -> Func:
    # jsonb_extract_path takes the key as a bound text argument (never an array index).
    return Func(F("metadata"), Value(key), function="jsonb_extract_path", output_field=JSONField())


def _text_at(key: str) -> Func:
    return Func(
        F("metadata"), Value(key), function="jsonb_extract_path_text", output_field=TextField()
    )


def _has_kind(key: str, kind: str) -> Q:
    # COALESCE keeps the predicate two-valued: a missing key is 'missing', never NULL.
    typeof = Func(_json_at(key), function="jsonb_typeof", output_field=CharField())
    return Q(Exact(Coalesce(typeof, Value("missing")), Value(kind)))


def _compare(node: Comparison) -> Q:
    kind = json_kind(node.value)
    if isinstance(node, Eq):
        # The containment says the same for a scalar value and lets the metadata GIN index
        # (jsonb_path_ops) find the rows; the type-strict equality stays the definition.
        return (
            Q(metadata__contains={node.key: node.value})
            & _has_kind(node.key, kind)
            & Q(Exact(_json_at(node.key), Value(node.value, output_field=JSONField())))
        )
    lookup = _ORDERED[type(node)]
    if kind == "string":
        # Code-point order whatever the database collation, as Python compares strings.
        return _has_kind(node.key, kind) & Q(
            lookup(Collate(_text_at(node.key), "C"), Value(node.value))
        )
    return _has_kind(node.key, kind) & Q(
        lookup(_json_at(node.key), Value(node.value, output_field=JSONField()))
    )


def _equalities(expression: Filter) -> dict[str, Any] | None:
    """``expression`` as one JSON containment when it is an equality or an ``And`` of them
    (on distinct keys); ``None`` for anything else."""
    if isinstance(expression, Eq):
        return {expression.key: expression.value}
    if not isinstance(expression, And):
        return None
    merged: dict[str, Any] = {}
    for operand in expression.operands:
        part = _equalities(operand)
        if part is None or merged.keys() & part.keys():
            return None
        merged.update(part)
    return merged


def compile_filter(expression: Filter) -> Q:
    """The ``Q`` object selecting rows whose ``metadata`` satisfies ``expression``.

    Follows :mod:`advisors_app.core.vectorstore.filters` exactly (the contract tests run the
    same filters on both stores): type-strict comparisons, missing keys false, ``Ne``/``Nin``
    as negations. Keys and values are bound parameters. Raises ``ValueError`` for an unknown
    node type.
    """
    if isinstance(expression, Comparison):
        return _compare(expression)
    if isinstance(expression, Ne):
        return ~_compare(Eq(expression.key, expression.value))
    if isinstance(expression, In):
        return _any(_compare(Eq(expression.key, v)) for v in expression.values)
    if isinstance(expression, Nin):
        return ~_any(_compare(Eq(expression.key, v)) for v in expression.values)
    if isinstance(expression, IsNull):
        typeof = Func(_json_at(expression.key), function="jsonb_typeof", output_field=CharField())
        return Q(Exact(Coalesce(typeof, Value("null")), Value("null")))
    if isinstance(expression, IsNotNull):
        return ~compile_filter(IsNull(expression.key))
    if isinstance(expression, Not):
        return ~compile_filter(expression.operand)
    if isinstance(expression, And):
        result = Q()
        for operand in expression.operands:
            result &= compile_filter(operand)
        return result
    if isinstance(expression, Or):
        return _any(compile_filter(operand) for operand in expression.operands)
    raise ValueError(f"unsupported filter expression {expression!r}")


def _any(parts: Iterator[Q] | Any) -> Q:
    result: Q | None = None
    for part in parts:
        result = part if result is None else result | part
    assert result is not None
    return result


def _first(value: Any, default: Any) -> Any:
    return default if value is None else value


class VectorSearch(NamedTuple):
    """What :meth:`PgVectorStore.search_vector` found, and how."""

    documents: list[Document]
    #: True when exact search gave them: the filter keeps few rows (at most ``EXACT_BELOW``),
    #: or the HNSW scan returned fewer than ``top_k`` rows.
    exact: bool


def _embed_sync(model: EmbeddingModel, texts: Sequence[str]) -> list[list[float]]:
    embed_sync = getattr(model, "embed_sync", None)
    if embed_sync is not None:
        return list(embed_sync(list(texts)))
    return run_sync(model.embed(list(texts)))


class PgVectorStore(VectorStore):
    """``VectorStore`` over the documents of one collection, on pgvector (see module docstring).

    ``collection``: a :class:`Collection` or its slug. ``embedding_model``: default
    :func:`default_embedding_model`; its ``dimensions`` must equal the ``embedding``
    column's, else :class:`EmbeddingDimensionError` right here. ``owner``: when given, searches
    and deletes see only shared rows (no owner) and that user's rows, and added rows belong to
    that user; ``None`` is the server's own unrestricted view of the collection. ``tenant``:
    when given, every operation is limited to, and every added row stamped with, that tenant.
    Use :meth:`for_user` for requests on behalf of a user.

    Sync methods run the ORM on the calling thread; the ``a``-prefixed twins run it through
    :func:`~advisors_app.db.threads.db_sync_to_async` (never on the event loop). Added
    documents' ``metadata["source"]``, if a string, fills the ``source`` column; identical
    text from the same source is stored once (documents without a source are never merged).
    Anonymous users cannot add documents.
    """

    __slots__ = ("collection", "dimensions", "embedding_model", "owner", "tenant")
    #: Filters keeping at most this many rows are searched exactly (:meth:`search_vector`).
    exact_below: ClassVar[int] = EXACT_BELOW
    #: The lexical leg keeps the rarest query words matching at most about this many rows.
    lexical_budget_rows: ClassVar[int] = LEXICAL_BUDGET_ROWS

    def __init__(
        self,
        collection: Collection | str,
        embedding_model: EmbeddingModel | None = None,
        *,
        owner: Any = None,
        tenant: str | None = None,
    ) -> None:
        if isinstance(collection, str):
            collection = Collection.objects.get(slug=collection)
        self.collection = collection
        self.embedding_model = embedding_model or default_embedding_model()
        self.dimensions: int = DocumentRow._meta.get_field("embedding").dimensions  # type: ignore[union-attr]
        if self.embedding_model.dimensions != self.dimensions:
            raise EmbeddingDimensionError(self.embedding_model.dimensions, self.dimensions)
        self.owner = owner
        self.tenant = tenant

    @classmethod
    def for_user(
        cls,
        collection: Collection | str,
        user: Any,
        embedding_model: EmbeddingModel | None = None,
        *,
        tenant: str | None = None,
    ) -> PgVectorStore:
        """The store as ``user`` may use it: shared rows plus the user's own.

        Raises ``PermissionDenied`` when the collection belongs to another user (or the user
        is anonymous and the collection is not shared). An anonymous user sees shared rows only.
        """
        if isinstance(collection, str):
            collection = Collection.objects.get(slug=collection)
        authenticated = user is not None and getattr(user, "is_authenticated", False)
        if collection.owner_id is not None and (
            not authenticated or collection.owner_id != user.pk
        ):
            raise PermissionDenied(f"collection {collection.slug!r} belongs to another user")
        owner = user if authenticated else AnonymousUser()
        return cls(collection, embedding_model, owner=owner, tenant=tenant)

    def _scope(self) -> Q:
        scope = Q(collection=self.collection)
        if self.owner is not None:
            if getattr(self.owner, "is_authenticated", False):
                scope &= Q(owner__isnull=True) | Q(owner=self.owner)
            else:
                scope &= Q(owner__isnull=True)
        if self.tenant is not None:
            scope &= Q(tenant=self.tenant)
        return scope

    def _check_vector(self, vector: Sequence[float]) -> list[float]:
        values = [float(v) for v in vector]
        if len(values) != self.dimensions:
            raise EmbeddingDimensionError(len(values), self.dimensions)
        return values

    def _embed(self, texts: Sequence[str]) -> list[list[float]]:
        vectors: list[list[float]] = []
        for start in range(0, len(texts), EMBED_BATCH_SIZE):
            vectors.extend(
                _embed_sync(self.embedding_model, texts[start : start + EMBED_BATCH_SIZE])
            )
        return [self._check_vector(v) for v in vectors]

    async def _aembed(self, texts: Sequence[str]) -> list[list[float]]:
        vectors: list[list[float]] = []
        for start in range(0, len(texts), EMBED_BATCH_SIZE):
            vectors.extend(
                await self.embedding_model.embed(list(texts[start : start + EMBED_BATCH_SIZE]))
            )
        return [self._check_vector(v) for v in vectors]

    # -- add -------------------------------------------------------------------------------

    def _rows(self, documents: list[Document], vectors: list[list[float]]) -> list[DocumentRow]:
        owner = self.owner if getattr(self.owner, "is_authenticated", False) else None
        rows = []
        for document, vector in zip(documents, vectors, strict=True):
            metadata = dict(document.metadata)
            try:
                json.dumps(metadata)
            except (TypeError, ValueError) as error:
                raise ValueError(
                    f"metadata of document {document.id!r} is not JSON: {error}"
                ) from error
            source = metadata.get("source")
            rows.append(
                DocumentRow(
                    id=document.id,
                    collection=self.collection,
                    owner=owner,
                    tenant=self.tenant or "",
                    source=source if isinstance(source, str) else "",
                    content=document.text,
                    metadata=metadata,
                    content_hash=content_hash(document.text),
                    embedding=vector,
                    search_vector=lexical_vector(self.collection.text_search_config, document.text),
                )
            )
        return rows

    def _write(self, documents: list[Document], vectors: list[list[float]]) -> None:
        if self.owner is not None and not getattr(self.owner, "is_authenticated", False):
            raise PermissionDenied("anonymous users cannot add documents")
        rows = self._rows(documents, vectors)
        ids = [row.id for row in rows]
        with transaction.atomic():
            taken = set(DocumentRow.objects.filter(pk__in=ids).values_list("pk", flat=True))
            mine = set(
                DocumentRow.objects.filter(self._scope(), pk__in=ids).values_list("pk", flat=True)
            )
            if taken - mine:
                raise PermissionDenied(
                    "document ids used outside this store's scope: "
                    + ", ".join(sorted(taken - mine))
                )
            # Same id: replace the row. Same text from the same source: keep the stored row.
            DocumentRow.objects.filter(pk__in=mine).delete()
            DocumentRow.objects.bulk_create(rows, ignore_conflicts=True)

    def add(self, documents: Sequence[Document]) -> None:
        listed = check_documents(documents)
        if listed:
            self._write(listed, self._embed([d.text for d in listed]))

    async def aadd(self, documents: Sequence[Document]) -> None:
        listed = check_documents(documents)
        if listed:
            vectors = await self._aembed([d.text for d in listed])
            await db_sync_to_async(self._write)(listed, vectors)

    # -- delete ----------------------------------------------------------------------------

    def delete(self, ids_or_filter: Sequence[str] | Filter | str) -> None:
        ids, expression = split_delete_target(ids_or_filter)
        rows = DocumentRow.objects.filter(self._scope())
        if ids is not None:
            rows.filter(pk__in=ids).delete()
        else:
            assert expression is not None
            rows.filter(compile_filter(expression)).delete()

    async def adelete(self, ids_or_filter: Sequence[str] | Filter | str) -> None:
        await db_sync_to_async(self.delete)(ids_or_filter)

    # -- search ----------------------------------------------------------------------------

    def ef_search_for(self, search: SearchRequest) -> int:
        """Candidates the HNSW scan keeps for ``search``: the request's ``ef_search``, else the
        collection's, else pgvector's default 40; raised to ``top_k``, at most 1000 (pgvector's
        limit: the iterative scan still returns a larger ``top_k``)."""
        ef = search.ef_search or self.collection.ef_search or DEFAULT_EF_SEARCH
        return min(EF_SEARCH_MAX, max(search.top_k, ef))

    def _query(self, vector: list[float], search: SearchRequest, exact: bool) -> list[Document]:
        rows = DocumentRow.objects.filter(self._scope())
        if search.filter_expression is not None:
            rows = rows.filter(compile_filter(search.filter_expression))
        rows = rows.annotate(distance=cosine_distance("embedding", self.dimensions, vector))
        # The threshold is applied to the top_k rows, not in SQL: a distance filter inside an
        # iterative index scan would keep the scan going to max_scan_tuples (pgvector README).
        selected = rows.order_by("distance").values_list("pk", "content", "metadata", "distance")[
            : search.top_k
        ]
        with transaction.atomic(), connection.cursor() as cursor:
            # SET LOCAL through set_config: bound parameters, reset at the end of the block.
            # enable_sort off: the HNSW index is the only path that yields rows in distance
            # order, so the planner takes it whatever it guesses a filter keeps. Without it a
            # filter on JSON metadata (estimated at 0.5%) gets a sequential scan and a sort.
            cursor.execute(
                "SELECT set_config('hnsw.iterative_scan', 'relaxed_order', true), "
                "set_config('hnsw.ef_search', %s, true), "
                "set_config('enable_sort', %s, true), "
                "set_config('enable_indexscan', %s, true)",
                [str(self.ef_search_for(search)), *(["on", "off"] if exact else ["off", "on"])],
            )
            found = list(selected)
        # relaxed_order may return neighbours slightly out of order: sort the few rows here.
        found.sort(key=lambda row: row[3])
        return [
            Document(
                content,
                {
                    **metadata,
                    SCORE: 1.0 - distance,
                    DISTANCE: distance,
                    RETRIEVAL: {"mode": "vector", "vector_rank": rank},
                },
                id=pk,
                score=1.0 - distance,
            )
            for rank, (pk, content, metadata, distance) in enumerate(found, start=1)
        ]

    def search_mode_for(self, search: SearchRequest) -> str:
        """The mode ``search`` runs in: its own, else the collection's."""
        return search.search_mode or self.collection.search_mode

    def _hybrid(
        self, vector: list[float], search: SearchRequest, mode: str, exact: bool
    ) -> list[Document]:
        rows = DocumentRow.objects.filter(self._scope())
        if search.filter_expression is not None:
            rows = rows.filter(compile_filter(search.filter_expression))
        collection = self.collection
        params = HybridParams(
            mode=mode,
            config=collection.text_search_config,
            top_k=search.top_k,
            vector_weight=_first(search.vector_weight, collection.vector_weight),
            lexical_weight=_first(search.lexical_weight, collection.lexical_weight),
            rrf_k=_first(search.rrf_k, collection.rrf_k),
            budget_rows=self.lexical_budget_rows,
        )
        sql, sql_params = search_sql(rows, search.query, vector, self.dimensions, params)
        ef_search = min(EF_SEARCH_MAX, max(params.depth, self.ef_search_for(search)))
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(
                "SELECT set_config('hnsw.iterative_scan', 'relaxed_order', true), "
                "set_config('hnsw.ef_search', %s, true), "
                "set_config('enable_sort', %s, true), "
                "set_config('enable_indexscan', %s, true)",
                [str(ef_search), *(["on", "off"] if exact else ["off", "on"])],
            )
            cursor.execute(sql, sql_params)
            found = cursor.fetchall()
        documents = []
        for pk, content, metadata, distance, vector_rank, lexical_rank, fused in found:
            how = {
                "mode": mode,
                "vector_rank": vector_rank,
                "lexical_rank": lexical_rank,
                "fused_score": fused,
            }
            if isinstance(metadata, str):
                metadata = json.loads(metadata)
            documents.append(
                Document(
                    content,
                    {**metadata, SCORE: 1.0 - distance, DISTANCE: distance, RETRIEVAL: how},
                    id=pk,
                    score=1.0 - distance,
                )
            )
        return documents

    def search_vector(self, vector: Sequence[float], search: SearchRequest) -> VectorSearch:
        """The ``top_k`` nearest documents to ``vector`` (HNSW), and whether exact search gave them.

        In ``lexical`` and ``hybrid`` mode (:meth:`search_mode_for`) the documents are those of
        one statement fusing the full-text ranking of ``search.query`` with the nearest
        neighbours (:mod:`advisors_app.stores.hybrid`); the rest below holds for its vector leg.

        A filter that keeps at most ``exact_below`` rows is searched exactly: its rows are
        found through the metadata index (equality filters) and their distances computed.
        Otherwise an iterative HNSW scan (``relaxed_order``, re-sorted) runs first. When it
        returns fewer than ``top_k`` rows — the filter keeps fewer, or the scan stopped at
        pgvector's ``hnsw.max_scan_tuples`` — the search is repeated exactly (index scans
        off), so a selective filter never silently shortens the result. ``exact`` says when
        exact search gave the rows. The similarity threshold then drops rows below it
        (scores are cosine similarities).
        """
        values = self._check_vector(vector)
        mode = self.search_mode_for(search)
        # Lexical search has no HNSW scan to replace: its filter rows come from the indexes.
        exact = (
            mode != "lexical" and search.filter_expression is not None and self._keeps_few(search)
        )
        if mode == "vector":
            results = self._query(values, search, exact=exact)
        else:
            results = self._hybrid(values, search, mode, exact)
        if not exact and len(results) < search.top_k and mode != "lexical":
            exact = True
            if mode == "vector":
                results = self._query(values, search, exact=True)
            else:
                results = self._hybrid(values, search, mode, exact=True)
        if search.similarity_threshold > 0.0:
            results = [
                d for d in results if d.score is not None and d.score >= search.similarity_threshold
            ]
        return VectorSearch(results, exact)

    def _keeps_few(self, search: SearchRequest) -> bool:
        """Whether the planner expects the filter to keep at most ``exact_below`` rows of the
        scope. Asked only of equality filters, as the containment the metadata index serves:
        PostgreSQL estimates that from the column's statistics, where its guesses for JSON
        expressions (the type guards, ranges) would call every filter selective. Planning
        only: counting the rows instead cost more than the search for a 10% filter."""
        assert search.filter_expression is not None
        contained = _equalities(search.filter_expression)
        if contained is None:
            return False
        rows = DocumentRow.objects.filter(self._scope(), metadata__contains=contained)
        plan = json.loads(rows.values("pk").explain(format="json"))
        return bool(plan[0]["Plan"]["Plan Rows"] <= self.exact_below)

    def _search(self, vector: list[float], search: SearchRequest) -> list[Document]:
        return self.search_vector(vector, search).documents

    def similarity_search(self, request: SearchRequest | str) -> list[Document]:
        search = as_search_request(request)
        [vector] = self._embed([search.query])
        return self._search(vector, search)

    async def asimilarity_search(self, request: SearchRequest | str) -> list[Document]:
        search = as_search_request(request)
        [vector] = await self._aembed([search.query])
        return await db_sync_to_async(self._search)(vector, search)
