"""Who a turn runs for, so that cached chains still retrieve only what that user may see.

Built chains are cached and shared by every user, so their retrieval advisors cannot hold a
per-user store. They hold a :class:`UserScopedVectorStore` instead: each operation asks
:func:`current_user` (a context variable the turn service sets around every step of a turn)
and works on ``PgVectorStore.for_user(collection, user)`` — the collection's shared rows plus
that user's own; rows the user adds belong to them. Without a user (code that runs a chain
directly) it is the anonymous view: shared rows only, and a private collection is refused.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator, Sequence
from typing import Any

from advisors_app.core.model import EmbeddingModel
from advisors_app.core.vectorstore import Document, Filter, SearchRequest, VectorStore
from advisors_app.models import Collection
from advisors_app.stores.vectors import PgVectorStore

__all__ = ["UserScopedVectorStore", "acting_for", "current_user"]

_user: contextvars.ContextVar[Any] = contextvars.ContextVar("advisors_app_user", default=None)


def current_user() -> Any:
    """The user the current turn runs for, or ``None`` outside a turn."""
    return _user.get()


@contextlib.contextmanager
def acting_for(user: Any) -> Iterator[None]:
    """Make ``user`` the :func:`current_user` inside the ``with`` block (this context only)."""
    token = _user.set(user)
    try:
        yield
    finally:
        _user.reset(token)


class UserScopedVectorStore(VectorStore):
    """A collection's documents as the current turn's user may use them (see module docstring).

    ``collection`` needs only its primary key and ``owner_id`` (no query is made to build the
    view); ``embedding_model`` must match the collection's 384-dimensional embeddings.
    Raises ``PermissionDenied`` when the collection belongs to another user.
    """

    __slots__ = ("_collection", "_embedding_model")

    def __init__(self, collection: Collection, embedding_model: EmbeddingModel) -> None:
        self._collection = collection
        self._embedding_model = embedding_model

    @property
    def name(self) -> str:
        return f"UserScopedVectorStore({self._collection.slug})"

    def _store(self) -> PgVectorStore:
        return PgVectorStore.for_user(self._collection, current_user(), self._embedding_model)

    async def aadd(self, documents: Sequence[Document]) -> None:
        await self._store().aadd(documents)

    async def adelete(self, ids_or_filter: Sequence[str] | Filter | str) -> None:
        await self._store().adelete(ids_or_filter)

    async def asimilarity_search(self, request: SearchRequest | str) -> list[Document]:
        return await self._store().asimilarity_search(request)
