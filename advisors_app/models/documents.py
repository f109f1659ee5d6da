"""Documents for retrieval: collections of text chunks with pgvector embeddings.

A :class:`Document` row is one chunk: its text, JSON metadata, the collection it belongs to,
who may see it, a SHA-256 of its text, and its embedding in a ``vector`` column with an HNSW
index for cosine distance. Re-ingesting identical text from the same source does not add a row
(unique ``collection, owner, tenant, source, content_hash`` for rows with a source; one user's
upload never hides another's).
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Sequence
from typing import Any

from django.conf import settings
from django.contrib.postgres.indexes import GinIndex, OpClass
from django.contrib.postgres.search import SearchVector, SearchVectorField
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Value
from django.db.models.expressions import CombinedExpression
from django.db.models.functions import Cast
from pgvector.django import CosineDistance, HalfVectorField, HnswIndex, VectorField

from advisors_app.core.vectorstore.lexical import lexical_text
from advisors_app.core.vectorstore.search import (
    EF_SEARCH_MAX,
    EF_SEARCH_MIN,
    RRF_K_MAX,
    SEARCH_MODES,
    WEIGHT_MAX,
)
from advisors_app.security.bidi import without_bidi_controls
from advisors_app.validation import validate_json_value

__all__ = [
    "DEFAULT_LEXICAL_WEIGHT",
    "DEFAULT_RRF_K",
    "DEFAULT_TEXT_SEARCH_CONFIG",
    "EMBEDDING_DIMENSIONS",
    "HNSW_VECTOR_LIMIT",
    "Collection",
    "Document",
    "content_hash",
    "cosine_distance",
    "embedding_index",
    "lexical_vector",
]

#: Dimensions of the ``embedding`` column (all-MiniLM-L6-v2). Changing it needs a migration.
EMBEDDING_DIMENSIONS = 384
#: pgvector indexes ``vector`` columns up to 2000 dimensions, ``halfvec`` up to 4000.
HNSW_VECTOR_LIMIT = 2000
HNSW_HALFVEC_LIMIT = 4000


#: The text search configuration of a new collection (PostgreSQL's ``english``).
DEFAULT_TEXT_SEARCH_CONFIG = "english"
#: Hybrid search defaults, measured on the demo's questions (docs/retrieval.md): reciprocal rank
#: fusion ``weight / (k + rank)`` with a small ``k`` (the top ranks of each leg count most)
#: and the lexical leg a little below the vector leg.
DEFAULT_RRF_K = 5
DEFAULT_LEXICAL_WEIGHT = 0.7


def embedding_index(name: str, dimensions: int, field: str = "embedding") -> HnswIndex:
    """The HNSW cosine index for a ``vector(dimensions)`` column (bug case B24).

    Up to 2000 dimensions it indexes the column itself (``vector_cosine_ops``); up to 4000 it
    is an expression index on ``(field::halfvec(dimensions))`` with ``halfvec_cosine_ops``
    (half-precision, pgvector's own limit). Queries must use :func:`cosine_distance` with the
    same dimensions so the planner can use the index; the expression index needs
    ``django.contrib.postgres`` in ``INSTALLED_APPS`` (it registers ``OpClass`` for index
    expressions). More than 4000 raises ``ValueError``.
    """
    options: dict[str, Any] = {"name": name, "m": 16, "ef_construction": 64}
    if dimensions <= HNSW_VECTOR_LIMIT:
        return HnswIndex(fields=[field], opclasses=["vector_cosine_ops"], **options)
    if dimensions <= HNSW_HALFVEC_LIMIT:
        expression = Cast(field, HalfVectorField(dimensions=dimensions))
        return HnswIndex(OpClass(expression, name="halfvec_cosine_ops"), **options)
    raise ValueError(
        f"pgvector cannot index {dimensions}-dimensional embeddings (at most "
        f"{HNSW_HALFVEC_LIMIT} as halfvec); use a model with fewer dimensions"
    )


def cosine_distance(field: str, dimensions: int, vector: Sequence[float]) -> CosineDistance:
    """``field <=> vector`` written the way :func:`embedding_index` indexed it."""
    if dimensions <= HNSW_VECTOR_LIMIT:
        return CosineDistance(field, list(vector))
    half = HalfVectorField(dimensions=dimensions)
    return CosineDistance(Cast(field, half), Cast(_vector_literal(vector), half))


def _vector_literal(vector: Sequence[float]) -> Value:
    return Value("[" + ",".join(repr(float(v)) for v in vector) + "]")


#: The ``simple`` configuration keeps exact identifier tokens as they are, in every language.
EXACT_CONFIG = "simple"


def lexical_vector(config: str, content: str, context: str = "") -> CombinedExpression:
    """A chunk's lexical index entry (its ``search_vector``), as an expression to insert or
    update with: the ``context`` line (weight B) and the ``content`` (D) in the text search
    configuration ``config``, and their identifiers as exact tokens in ``simple`` (A); see
    :mod:`advisors_app.core.vectorstore.lexical` and ``advisors_app.stores.hybrid``."""
    text = lexical_text(content)
    heading = lexical_text(context)
    exact = " ".join(part for part in (text.exact, heading.exact) if part)
    return (
        SearchVector(Value(heading.words), config=config, weight="B")
        + SearchVector(Value(text.words), config=config, weight="D")
        + SearchVector(Value(exact), config=EXACT_CONFIG, weight="A")
    )


def content_hash(text: str) -> str:
    """Lower-case hex SHA-256 of the UTF-8 text (64 characters)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _new_id() -> str:
    return str(uuid.uuid4())


class Collection(models.Model):
    """A named set of documents searched together (one knowledge base).

    ``owner`` set: only that user may search or change it; empty: shared by every user.
    ``tenant`` is a free label the server may use to keep tenants apart. ``ef_search``: the
    HNSW search breadth for this collection (``None``: pgvector's 40), see
    ``PgVectorStore.ef_search_for``. ``search_mode``, ``vector_weight``, ``lexical_weight``
    and ``rrf_k``: how a search that does not say otherwise runs (``vector``, ``lexical``
    or ``hybrid``: both fused by weighted reciprocal rank, docs/retrieval.md).
    ``text_search_config``: the PostgreSQL text search configuration of the lexical index
    (``english``, ``german``, ``simple``...); changing it needs ``manage.py reindex``.
    """

    slug = models.SlugField(max_length=100, unique=True)
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="advisor_collections",
        help_text="Only this user may use the collection; leave empty to share it.",
    )
    tenant = models.CharField(max_length=100, blank=True, db_index=True)
    ef_search = models.PositiveSmallIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(EF_SEARCH_MIN), MaxValueValidator(EF_SEARCH_MAX)],
        help_text=f"Candidates each HNSW search keeps ({EF_SEARCH_MIN}–{EF_SEARCH_MAX}; empty: "
        "40). Higher finds more of the true nearest documents and costs more time; a request "
        "may set its own.",
    )
    search_mode = models.CharField(
        max_length=10,
        choices=[(mode, mode) for mode in SEARCH_MODES],
        default="vector",
        help_text="How searches run unless a chain says otherwise: vector (embeddings), "
        "lexical (full text) or hybrid (both, fused by reciprocal rank).",
    )
    vector_weight = models.FloatField(
        default=1.0,
        validators=[MinValueValidator(0.0), MaxValueValidator(WEIGHT_MAX)],
        help_text="Hybrid search: weight of the vector ranking in the fusion.",
    )
    lexical_weight = models.FloatField(
        default=DEFAULT_LEXICAL_WEIGHT,
        validators=[MinValueValidator(0.0), MaxValueValidator(WEIGHT_MAX)],
        help_text="Hybrid search: weight of the full-text ranking in the fusion.",
    )
    rrf_k = models.PositiveSmallIntegerField(
        default=DEFAULT_RRF_K,
        validators=[MinValueValidator(1), MaxValueValidator(RRF_K_MAX)],
        help_text="Hybrid search: k of reciprocal rank fusion, weight / (k + rank); smaller "
        "favours each ranking's first documents.",
    )
    text_search_config = models.CharField(
        max_length=63,
        default=DEFAULT_TEXT_SEARCH_CONFIG,
        help_text="PostgreSQL text search configuration of the full-text index (english, "
        "german, simple, ...). Run manage.py reindex after changing it.",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["slug"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(ef_search__isnull=True)
                | models.Q(ef_search__gte=EF_SEARCH_MIN, ef_search__lte=EF_SEARCH_MAX),
                name="advisors_collection_ef_search_range",
            ),
            models.CheckConstraint(
                condition=models.Q(search_mode__in=SEARCH_MODES),
                name="advisors_collection_search_mode",
            ),
        ]

    def clean(self) -> None:
        from django.core.exceptions import ValidationError
        from django.db import connection

        super().clean()
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT 1 FROM pg_ts_config WHERE cfgname = %s", [self.text_search_config]
            )
            if cursor.fetchone() is None:
                raise ValidationError(
                    {
                        "text_search_config": f"{self.text_search_config!r} is not a text "
                        "search configuration of this database (e.g. english, simple)."
                    }
                )

    def __str__(self) -> str:
        return self.name or self.slug


class Document(models.Model):
    """One chunk of text with its metadata and embedding (a core ``Document`` when read)."""

    id = models.CharField(primary_key=True, max_length=255, default=_new_id, editable=False)
    collection = models.ForeignKey(Collection, on_delete=models.CASCADE, related_name="documents")
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="advisor_documents",
        help_text="Only this user may retrieve it; leave empty to share it.",
    )
    tenant = models.CharField(max_length=100, blank=True, db_index=True)
    source = models.CharField(
        max_length=500, blank=True, help_text="Where the text came from (file or upload name)."
    )
    content = models.TextField()
    context = models.TextField(
        blank=True,
        default="",
        # Also in the database: rows written by COPY or raw SQL get no context line.
        db_default="",
        help_text="The chunk's context line (document title and heading path): embedded and "
        "indexed with the text, never shown as part of it.",
    )
    #: The lexical index: written with the row (``advisors_app.stores.vectors.lexical_vector``).
    search_vector = SearchVectorField(null=True, editable=False)
    metadata = models.JSONField(default=dict, blank=True, validators=[validate_json_value])
    content_hash = models.CharField(max_length=64, editable=False)
    embedding = VectorField(dimensions=EMBEDDING_DIMENSIONS)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["collection", "source", "created_at"]
        constraints = [
            # NULL owners count as equal, so shared rows are de-duplicated too. Rows without a
            # source (e.g. long-term chat memory) may repeat a text: "yes" in two
            # conversations is two memories.
            models.UniqueConstraint(
                fields=["collection", "owner", "tenant", "source", "content_hash"],
                condition=~models.Q(source=""),
                name="advisors_document_unique_text",
                nulls_distinct=False,
            )
        ]
        indexes = [
            embedding_index("advisors_document_hnsw", EMBEDDING_DIMENSIONS),
            models.Index(fields=["collection", "source"], name="advisors_document_source"),
            # Metadata filters (``metadata @> {...}``): finds the few rows a selective filter
            # keeps, searched exactly (PgVectorStore.search_vector).
            GinIndex(
                fields=["metadata"], opclasses=["jsonb_path_ops"], name="advisors_document_meta"
            ),
            # Full-text search (the lexical leg of PgVectorStore's lexical and hybrid modes).
            GinIndex(fields=["search_vector"], name="advisors_document_lexical"),
        ]

    def __str__(self) -> str:
        # Shown as the admin's title, breadcrumb and heading: no override character turns them.
        return without_bidi_controls(f"{self.source or self.id}: {self.content[:60]}")

    def save(self, *args: object, **kwargs: object) -> None:
        self.content_hash = content_hash(self.content)
        self.search_vector = lexical_vector(
            self.collection.text_search_config, self.content, self.context
        )
        super().save(*args, **kwargs)  # type: ignore[arg-type]
