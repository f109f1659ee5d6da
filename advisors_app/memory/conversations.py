"""Conversations belong to users: public ids, stored keys and ownership.

Clients see a **public** conversation id: one the server generated (32 hex digits) or one the
client chose (letters, digits, ``._:-``, at most 128 characters). The conversation is stored
under a **key** namespaced by its owner — ``"<user pk>:<public id>"`` — which is also the
``CONVERSATION_ID`` the memory advisors read and write. So two users choosing the same id get
two conversations, and a user who sends another user's id reaches nothing of theirs: the id
behaves exactly as one never used (a new, empty conversation of the caller's own). The REST
and websocket layers list and show conversations through :func:`user_conversations` and
:func:`find_conversation`, and show ids with :func:`public_conversation_id`.

A stored reply carries the trace id of the turn that wrote it (``metadata["trace_id"]``,
:data:`TRACE_ID`), so a transcript read back links each reply to its call log. The id goes down
with the turn (the context's ``TRACE_ID``) and whoever stores the reply writes it there; it is
never patched in afterwards.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from typing import Any

from django.db.models import QuerySet

from advisors_app.core.attributes import TRACE_ID_METADATA
from advisors_app.db.prepared import PreparedQuery
from advisors_app.exceptions import TurnError
from advisors_app.models import Conversation
from advisors_app.stores.memory import DjangoChatMemoryRepository
from advisors_app.validation import FieldErrors

__all__ = [
    "MAX_PUBLIC_ID_LENGTH",
    "TRACE_ID",
    "StoredConversation",
    "afind_conversation",
    "conversation_id_errors",
    "conversation_key",
    "conversation_title",
    "create_conversation",
    "create_conversation_with_message",
    "discard_if_empty",
    "find_conversation",
    "listed_conversations",
    "public_conversation_id",
    "turn_conversation_of",
    "turn_conversation_read",
    "unlist",
    "user_conversations",
]

MAX_PUBLIC_ID_LENGTH = 128
_PUBLIC_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]*$")
_TITLE_LENGTH = 80
#: The ``ChatMessage.metadata`` key of a reply's trace id (``CallLog.trace_id`` of its turn).
TRACE_ID = TRACE_ID_METADATA


def conversation_key(user: Any, public_id: str) -> str:
    """The stored id (``CONVERSATION_ID``) of ``user``'s conversation ``public_id``."""
    return f"{user.pk}:{public_id}"


def public_conversation_id(key: str) -> str:
    """The id clients see for the stored ``key`` (the part after the owner's pk)."""
    return key.partition(":")[2] or key


def conversation_id_errors(value: Any) -> FieldErrors:
    """Errors of a client-sent conversation id (``None`` means "start a new one")."""
    if value is None:
        return {}
    if not isinstance(value, str) or not value:
        return {"conversation_id": ["Enter a conversation id (a non-empty string) or omit it."]}
    if len(value) > MAX_PUBLIC_ID_LENGTH or not _PUBLIC_ID.match(value):
        return {
            "conversation_id": [
                f"Use at most {MAX_PUBLIC_ID_LENGTH} letters, digits and ._:- "
                "(starting with a letter or digit)."
            ]
        }
    return {}


def conversation_title(message: str) -> str:
    """The title of a conversation whose first message is ``message``."""
    return _title(message)


def _title(message: str) -> str:
    line = " ".join(message.split())
    return line if len(line) <= _TITLE_LENGTH else line[: _TITLE_LENGTH - 1] + "…"


@dataclass(frozen=True, slots=True)
class StoredConversation:
    """What a turn needs of its conversation's row (one query, :func:`turn_conversation_read`)."""

    pk: int
    owner_id: int | None
    last_sequence: int
    #: The version the conversation started on (``None``: before versions, or the draft).
    chain_version_id: int | None
    chain_version_number: int | None
    chain_version_snapshot_hash: str | None
    chain_version_chain_id: int | None
    title: str


# Run on every later turn: compiled once (advisors_app.db.prepared).
_TURN_CONVERSATION = PreparedQuery(
    lambda key: (
        Conversation.objects.filter(conversation_id=key)
        .values_list(
            "pk",
            "owner_id",
            "last_sequence",
            "chain_version_id",
            "chain_version__number",
            "chain_version__snapshot_hash",
            "chain_version__chain_id",
            "title",
        )
        .order_by()[:1]
    ),  # the key is unique
    key="\x00key",
)


def turn_conversation_read(user: Any, public_id: str) -> tuple[PreparedQuery, dict[str, Any]]:
    """The query of the row of ``user``'s conversation ``public_id`` for a turn, to read with
    other queries at once (:func:`~advisors_app.db.prepared.rows_together`); its rows go to
    :func:`turn_conversation_of`."""
    return _TURN_CONVERSATION, {"key": conversation_key(user, public_id)}


def turn_conversation_of(user: Any, rows: list[tuple[Any, ...]]) -> StoredConversation | None:
    """The conversation the rows of :func:`turn_conversation_read` hold, or ``None`` if there
    is none. Raises :class:`TurnError` (``invalid``, field ``conversation_id``) if the key is
    held by another owner, which only rows written outside this module can cause."""
    if not rows:
        return None
    found = StoredConversation(*rows[0])
    if found.owner_id != user.pk:
        raise TurnError(
            "invalid", "The request is invalid.", errors={"conversation_id": ["Not found."]}
        )
    return found


def create_conversation(
    user: Any,
    public_id: str | None,
    *,
    title: str = "",
    chain_version_id: int | None = None,
    listed: bool = True,
) -> tuple[str, str, bool, str]:
    """``(key, public id, created, title)`` of a new conversation of ``user`` (blocking): one
    ``INSERT`` for a server-generated id (``public_id=None``); a client-chosen id another
    request created meanwhile is taken as it is (``created`` false; :func:`discard_if_empty`
    removes a created one again if the turn stores nothing). ``listed=False``: kept out of
    the user's lists (:func:`listed_conversations`)."""
    if public_id is None:
        public = uuid.uuid4().hex
        key = conversation_key(user, public)
        Conversation.objects.create(
            conversation_id=key,
            owner_id=user.pk,
            title=_title(title),
            chain_version_id=chain_version_id,
            listed=listed,
        )
        return key, public, True, _title(title)
    key = conversation_key(user, public_id)
    conversation, created = Conversation.objects.get_or_create(
        conversation_id=key,
        defaults={
            "owner_id": user.pk,
            "title": _title(title),
            "chain_version_id": chain_version_id,
            "listed": listed,
        },
    )
    if conversation.owner_id != user.pk:
        raise TurnError(
            "invalid", "The request is invalid.", errors={"conversation_id": ["Not found."]}
        )
    return key, public_id, created, conversation.title


def create_conversation_with_message(
    user: Any, *, title: str, chain_version_id: int | None, text: str, owner: str
) -> tuple[str, str, int]:
    """``(key, public id, message id)`` of a new conversation of ``user`` with a server-made
    id, created holding ``text`` as its first message, pending (one ``INSERT``: a turn's first
    message costs no statement more than its conversation;
    :meth:`~advisors_app.stores.memory.DjangoChatMemoryRepository.create_with_pending`)."""
    public = uuid.uuid4().hex
    key = conversation_key(user, public)
    pending = DjangoChatMemoryRepository.create_with_pending(
        key,
        text,
        owner,
        owner_id=user.pk,
        title=_title(title),
        chain_version_id=chain_version_id,
    )
    return key, public, pending


def discard_if_empty(key: str) -> bool:
    """Delete conversation ``key`` if it holds no message: a turn that failed, or whose message
    was refused before memory, leaves no conversation (titled with that message) behind.
    Whether it was deleted. Blocking (the turn service calls it in its closing transaction)."""
    deleted, _ = Conversation.objects.filter(conversation_id=key, messages__isnull=True).delete()
    return deleted > 0


def user_conversations(user: Any) -> QuerySet[Conversation]:
    """The conversations ``user`` owns (newest first)."""
    return Conversation.objects.filter(owner_id=user.pk)


def listed_conversations(user: Any) -> QuerySet[Conversation]:
    """The conversations ``user``'s lists show (the chat sidebar, ``GET /api/conversations/``):
    theirs but those of the admin playground and evaluation runs (:func:`unlist`)."""
    return user_conversations(user).filter(listed=True)


def unlist(user: Any, public_id: str) -> None:
    """Keep ``user``'s conversation ``public_id`` out of their lists (blocking): a staff
    member's playground test is not one of their chats."""
    Conversation.objects.filter(conversation_id=conversation_key(user, public_id)).update(
        listed=False
    )


def find_conversation(user: Any, public_id: str) -> Conversation | None:
    """``user``'s conversation ``public_id``, or ``None`` (also for anyone else's)."""
    if conversation_id_errors(public_id):
        return None
    return (
        user_conversations(user).filter(conversation_id=conversation_key(user, public_id)).first()
    )


async def afind_conversation(user: Any, public_id: str) -> Conversation | None:
    """Async twin of :func:`find_conversation`."""
    if conversation_id_errors(public_id):
        return None
    return await (
        user_conversations(user).filter(conversation_id=conversation_key(user, public_id)).afirst()
    )
