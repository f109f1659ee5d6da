"""Who a turn runs for, so that cached chains still retrieve only what that user may see.

Built chains are cached and shared by every user, so their retrieval advisors cannot hold a
per-user store. They hold a :class:`UserScopedVectorStore` instead: the advisors search and add
through ``store.for_context(request.context)``, the view of the user the request context names
(``PRINCIPAL``, which the turn service puts there and nothing else carries), which works on
``PgVectorStore.for_user(collection, user, tenant=user_tenant(user))`` — the collection's shared
rows plus that user's own, of the user's tenant when ``ADVISORS["TENANT_RESOLVER"]`` names
one; rows the user adds belong to them. Without a user (code that runs a chain directly) it is
the anonymous view: shared rows only, and a private collection is refused. The REST API scopes
collections and documents with the same functions.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from django.db.models import Q, QuerySet
from django.utils.module_loading import import_string

from advisors_app.conf import app_settings
from advisors_app.core.attributes import PRINCIPAL
from advisors_app.core.model import EmbeddingModel
from advisors_app.core.vectorstore import Document, Filter, SearchRequest, VectorStore
from advisors_app.db.threads import db_sync_to_async
from advisors_app.models import Collection
from advisors_app.models import Document as DocumentRow
from advisors_app.stores.vectors import PgVectorStore

__all__ = [
    "SEARCH_FIELDS",
    "UserScopedVectorStore",
    "user_tenant",
    "visible_collections",
    "visible_documents",
]


#: The collection fields a turn's search reads (scope, HNSW breadth, mode and fusion).
SEARCH_FIELDS = (
    "id",
    "slug",
    "owner_id",
    "tenant",
    "ef_search",
    "search_mode",
    "vector_weight",
    "lexical_weight",
    "rrf_k",
    "text_search_config",
)


@functools.lru_cache(maxsize=8)
def _resolver(path: str) -> Callable[[Any], str | None]:
    return import_string(path)  # type: ignore[no-any-return]


def user_tenant(user: Any) -> str | None:
    """``user``'s tenant from ``ADVISORS["TENANT_RESOLVER"]``; ``None``: no tenant scope.

    Synchronous (a resolver may query the database).
    """
    path = app_settings.TENANT_RESOLVER
    if not path or user is None or not getattr(user, "is_authenticated", False):
        return None
    return _resolver(path)(user) or None


def visible_collections(user: Any) -> QuerySet[Collection]:
    """Collections ``user`` may use: shared ones and their own; of their tenant or none."""
    collections = Collection.objects.filter(Q(owner__isnull=True) | Q(owner_id=user.pk))
    tenant = user_tenant(user)
    if tenant is not None:
        collections = collections.filter(tenant__in=("", tenant))
    return collections


def visible_documents(user: Any) -> QuerySet[DocumentRow]:
    """Documents ``user`` may see: shared and own rows of :func:`visible_collections`, of
    their tenant (the rows ``PgVectorStore.for_user`` searches)."""
    documents = DocumentRow.objects.filter(
        Q(owner__isnull=True) | Q(owner_id=user.pk), collection__in=visible_collections(user)
    )
    tenant = user_tenant(user)
    if tenant is not None:
        documents = documents.filter(tenant=tenant)
    return documents


class UserScopedVectorStore(VectorStore):
    """A collection's documents as ``user`` may use them (see module docstring); ``None``: the
    anonymous view. :meth:`for_context` gives the view of a request's ``PRINCIPAL``.

    Holds the collection's slug only: a published chain version names its collections by slug,
    and the row (owner, tenant) is read when a turn uses the store, so building the chain
    makes no query. ``embedding_model`` must match the collection's 384-dimensional
    embeddings. Raises ``PermissionDenied`` when the collection belongs to another user and
    ``LookupError`` when it no longer exists.
    """

    __slots__ = ("_collection", "_embedding_model", "_user")

    def __init__(self, collection: str, embedding_model: EmbeddingModel, user: Any = None) -> None:
        self._collection = collection
        self._embedding_model = embedding_model
        self._user = user

    def for_context(self, context: Mapping[str, Any]) -> UserScopedVectorStore:
        return UserScopedVectorStore(
            self._collection, self._embedding_model, context.get(PRINCIPAL)
        )

    @property
    def name(self) -> str:
        return f"UserScopedVectorStore({self._collection})"

    def _view(self, user: Any) -> PgVectorStore:
        row = (
            # Every field a search reads: a deferred one would cost a query of its own.
            Collection.objects.only(*SEARCH_FIELDS).filter(slug=self._collection).first()
        )
        if row is None:
            raise LookupError(f"collection {self._collection!r} no longer exists")
        tenant = user_tenant(user) if app_settings.TENANT_RESOLVER else None
        return PgVectorStore.for_user(row, user, self._embedding_model, tenant=tenant)

    async def _store(self) -> PgVectorStore:
        return await db_sync_to_async(self._view)(self._user)

    async def aadd(self, documents: Sequence[Document]) -> None:
        await (await self._store()).aadd(documents)

    async def adelete(self, ids_or_filter: Sequence[str] | Filter | str) -> None:
        await (await self._store()).adelete(ids_or_filter)

    async def asimilarity_search(self, request: SearchRequest | str) -> list[Document]:
        return await (await self._store()).asimilarity_search(request)
