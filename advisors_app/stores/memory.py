"""``DjangoChatMemoryRepository``: the chat-memory contract on the Django ORM (PostgreSQL).

Spring AI ``JdbcChatMemoryRepository``, with its defects fixed (reference §5.3): tool calls and tool
responses are stored, not dropped (defect 21); conversation ids may have 255 characters; ``append``
adds a turn in O(turn) instead of deleting and re-inserting the conversation (defect 19); concurrent
appends to one conversation never interleave or lose messages: each allocates its sequence numbers
by raising ``Conversation.last_sequence`` in one ``UPDATE ... RETURNING``, which holds the
conversation's row lock until its transaction ends; ``find_last`` reads the newest messages from a
bounded range of the ``(conversation, sequence)`` index, O(limit) however long the conversation is.
Messages read back carry no storage metadata (Spring AI adds a timestamp that breaks de-duplication,
defect 16).

A turn of the turn pipeline (:mod:`advisors_app.turn`) reads its conversation's window with its
other reads before the chain runs (:meth:`~DjangoChatMemoryRepository.window_read`, turned into a
:class:`~advisors_app.core.memory.turn.ReadAhead` by :meth:`~DjangoChatMemoryRepository.read_ahead`)
and hands it to the memory advisors in a ``TurnMemory``; what they would append is held there and
written by :meth:`~DjangoChatMemoryRepository.write_held` in the turn's one transaction, with the
call log. The repository itself holds no turn: every method reads or writes at once.

A turn's message is stored **before** its chain runs, flagged pending
(:meth:`~DjangoChatMemoryRepository.write_pending`: ``metadata["turn_pending"]``), so a server
killed mid-turn leaves it stored; the turn's write replaces it (:meth:`write_held` with
``pending``) — at the same sequence number when nothing was appended after it, so a finished turn
leaves no gap. Pending rows are never history for the model: every read of the chat-memory
contract and the turn's window leaves them out (:func:`unanswered`); readers for people show them
(:mod:`advisors_app.memory.pending`).

Async twins run the sync methods through :func:`~advisors_app.db.threads.db_sync_to_async`
(thread-sensitive, as Django's own async ORM methods do; a pooled connection goes back after
each), so the event loop never blocks on the database; a
transaction and its row lock cannot span ``await`` points in Django's async ORM.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from typing import Any

from django.db import connections, router, transaction
from django.db.models import F, Q, QuerySet
from django.utils import timezone

from advisors_app.core.memory import (
    ChatMemoryRepository,
    HeldAppend,
    ReadAhead,
    check_conversation_id,
)
from advisors_app.core.memory.repository import check_limit, check_messages
from advisors_app.core.messages import (
    AssistantMessage,
    Media,
    Message,
    MessageType,
    SystemMessage,
    ToolCall,
    ToolResponse,
    ToolResponseMessage,
    UserMessage,
)
from advisors_app.db.prepared import PreparedQuery
from advisors_app.db.threads import db_sync_to_async
from advisors_app.models import ChatMessage, Conversation

__all__ = ["TURN_PENDING", "DjangoChatMemoryRepository", "unanswered"]

#: Message-metadata key of a user message stored before its turn ran (what it holds: the
#: ``"<host>:<pid>"`` of the process running the turn, for the recovery of a dead one). The
#: turn's one write replaces the row; one left is of a turn that never finished.
TURN_PENDING = "turn_pending"

_FIELDS = ("message_type", "text", "metadata", "tool_calls", "tool_responses", "media")
_SYSTEM = MessageType.SYSTEM.value
_ASSISTANT = MessageType.ASSISTANT.value
_BATCH_SIZE = 1000
#: Extra sequence numbers read by ``find_last`` beyond ``limit`` (room for system messages).
_SPAN_SLACK = 16


def unanswered(metadata: Any) -> bool:
    """Whether a row's ``metadata`` is that of a message stored before its turn ran and not
    replaced by it (:data:`TURN_PENDING`): never history for the model."""
    return isinstance(metadata, dict) and TURN_PENDING in metadata


def _answered(rows: Sequence[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """``rows`` (of ``_FIELDS``) without the unanswered messages."""
    return [row for row in rows if not unanswered(row[2])]


def _window(messages: QuerySet[ChatMessage], low: Any) -> QuerySet[ChatMessage]:
    """A turn's window of ``messages``: the system messages and those after sequence ``low``,
    oldest first."""
    return (
        messages.filter(Q(message_type=_SYSTEM) | Q(sequence__gt=low))
        .order_by("sequence")
        .values_list(*_FIELDS)
    )


# A turn's window read (``read_window``), compiled once (advisors_app.db.prepared).
_WINDOW = PreparedQuery(
    lambda conversation, low: _window(
        ChatMessage.objects.filter(conversation_id=conversation), low
    ),
    conversation=2_000_000_001,
    low=2_000_000_002,
)
# The same window, found by the conversation's key; ``span`` sequence numbers back from its
# ``last_sequence`` (read in the same statement).
_WINDOW_BY_KEY = PreparedQuery(
    lambda key, span: _window(
        ChatMessage.objects.filter(conversation__conversation_id=key),
        F("conversation__last_sequence") - span,
    ),
    key="\x00key",
    span=2_000_000_004,
)


def _media_to_json(media: Media) -> dict[str, Any]:
    if isinstance(media.data, bytes):
        data = {"data_base64": base64.b64encode(media.data).decode("ascii")}
    else:
        data = {"data": media.data}
    return {"mime_type": media.mime_type, "name": media.name, **data}


def _media_from_json(item: dict[str, Any]) -> Media:
    if "data_base64" in item:
        return Media(item["mime_type"], base64.b64decode(item["data_base64"]), item.get("name", ""))
    return Media(item["mime_type"], item["data"], item.get("name", ""))


def _row(conversation_pk: int, sequence: int, message: Message) -> ChatMessage:
    row = ChatMessage(
        conversation_id=conversation_pk,
        sequence=sequence,
        message_type=message.message_type.value,
        text=message.text,
        metadata=dict(message.metadata),
    )
    if isinstance(message, AssistantMessage):
        row.tool_calls = [call.to_dict() for call in message.tool_calls]
    elif isinstance(message, ToolResponseMessage):
        row.tool_responses = [response.to_dict() for response in message.responses]
    elif isinstance(message, UserMessage):
        row.media = [_media_to_json(m) for m in message.media]
    return row


def _message(
    message_type: str,
    text: str,
    metadata: dict[str, Any],
    tool_calls: list[dict[str, Any]],
    tool_responses: list[dict[str, Any]],
    media: list[dict[str, Any]],
) -> Message:
    if message_type == MessageType.USER:
        return UserMessage(text, metadata, tuple(_media_from_json(m) for m in media))
    if message_type == MessageType.ASSISTANT:
        calls = tuple(
            ToolCall(c["id"], c["name"], c.get("arguments", "{}"), c.get("type", "function"))
            for c in tool_calls
        )
        return AssistantMessage(text, metadata, calls)
    if message_type == MessageType.TOOL:
        responses = tuple(
            ToolResponse(r["id"], r["name"], r["response_data"]) for r in tool_responses
        )
        return ToolResponseMessage(responses, metadata)
    return SystemMessage(text, metadata)


def _insert_pending(head: str, values: dict[str, Any], text: str, owner: str) -> int:
    """Run ``head`` (a ``WITH c AS (...)`` giving the conversation's ``id`` and the sequence
    number to use, ``{conversation}`` its table) and insert the pending message at it.

    Committed asynchronously (``synchronous_commit`` off for this statement's transaction
    alone): PostgreSQL has the row at once, for every session, and writes it to disk within
    a few hundred milliseconds, without the turn waiting for the flush (about 0.5 ms instead
    of 2 ms on a loaded machine, before the model runs). What it guards against is the app
    server dying, which this survives; a crash of PostgreSQL itself in that window loses the
    pending row alone — the state before messages were stored early — and the turn's finish,
    a synchronous commit, flushes it with everything before it."""
    db = router.db_for_write(ChatMessage)
    quote = connections[db].ops.quote_name
    sql = head.format(conversation=quote(Conversation._meta.db_table)) + (
        f", a AS (SELECT set_config('synchronous_commit', 'off', true)) "
        f"INSERT INTO {quote(ChatMessage._meta.db_table)} (conversation_id, sequence, "
        f"message_type, text, metadata, tool_calls, tool_responses, media, created_at) "
        f"SELECT c.id, c.last_sequence, %(type)s, %(text)s, %(metadata)s::jsonb, "
        f"'[]'::jsonb, '[]'::jsonb, '[]'::jsonb, %(now)s FROM c, a RETURNING id"
    )
    params = {
        **values,
        "now": timezone.now(),
        "type": MessageType.USER.value,
        "text": text,
        "metadata": json.dumps({TURN_PENDING: owner}),
    }
    with connections[db].cursor() as cursor:
        cursor.execute(sql, params)
        found = cursor.fetchone()
    if found is None:
        raise ValueError(f"No conversation {values['key']!r} to store a message in")
    return int(found[0])


class DjangoChatMemoryRepository(ChatMemoryRepository):
    """Stores conversations in :class:`~advisors_app.models.Conversation` and
    :class:`~advisors_app.models.ChatMessage` rows.

    Stateless: one instance may be shared by every request and thread. ``save_all`` keeps the
    conversation row (owner, title) and replaces its messages; ``delete_by_conversation_id``
    deletes the conversation row and its messages. Metadata must be JSON-serialisable
    (``DjangoJSONEncoder``: dates, decimals and UUIDs come back as strings).
    """

    # Spring AI's contract -------------------------------------------------------------------

    def find_conversation_ids(self) -> list[str]:
        return list(
            Conversation.objects.order_by("created_at", "pk").values_list(
                "conversation_id", flat=True
            )
        )

    def find_by_conversation_id(self, conversation_id: str) -> list[Message]:
        check_conversation_id(conversation_id)
        rows = (
            ChatMessage.objects.filter(conversation__conversation_id=conversation_id)
            .order_by("sequence")
            .values_list(*_FIELDS)
        )
        return [_message(*row) for row in _answered(rows)]

    def save_all(self, conversation_id: str, messages: Sequence[Message]) -> None:
        check_conversation_id(conversation_id)
        batch = check_messages(messages)
        with transaction.atomic():
            pk, _ = self._allocate(conversation_id, 0)
            ChatMessage.objects.filter(conversation_id=pk).delete()
            ChatMessage.objects.bulk_create(
                [_row(pk, i, m) for i, m in enumerate(batch, start=1)], batch_size=_BATCH_SIZE
            )
            Conversation.objects.filter(pk=pk).update(last_sequence=len(batch))

    def delete_by_conversation_id(self, conversation_id: str) -> None:
        check_conversation_id(conversation_id)
        Conversation.objects.filter(conversation_id=conversation_id).delete()

    # Efficient extension --------------------------------------------------------------------

    def append(
        self, conversation_id: str, messages: Sequence[Message], *, replace_system: bool = False
    ) -> None:
        check_conversation_id(conversation_id)
        batch = check_messages(messages)
        if not batch and not replace_system:
            return
        with transaction.atomic():
            self._append(conversation_id, batch, replace_system)

    def find_last(self, conversation_id: str, limit: int) -> list[Message]:
        check_conversation_id(conversation_id)
        check_limit(limit)
        head = list(
            Conversation.objects.filter(conversation_id=conversation_id)
            .order_by()
            .values_list("pk", "last_sequence")[:1]
        )
        if not head or limit == 0:
            return []
        pk, last = head[0]
        # A bounded range of the (conversation, sequence) index, so the cost is O(limit)
        # whatever plan PostgreSQL picks; it widens only when system messages or deleted rows
        # leave fewer than ``limit`` messages in it.
        span = limit + _SPAN_SLACK
        while True:
            low = last - span
            rows = list(
                ChatMessage.objects.filter(conversation_id=pk, sequence__gt=low)
                .exclude(message_type=_SYSTEM)
                .exclude(metadata__has_key=TURN_PENDING)
                .order_by("-sequence")
                .values_list(*_FIELDS)[:limit]
            )
            if len(rows) == limit or low <= 0:
                break
            span *= 4
        rows.reverse()
        return [_message(*row) for row in rows]

    def find_system_messages(self, conversation_id: str) -> list[Message]:
        check_conversation_id(conversation_id)
        rows = (
            ChatMessage.objects.filter(
                conversation__conversation_id=conversation_id, message_type=_SYSTEM
            )
            .order_by("sequence")
            .values_list(*_FIELDS)
        )
        return [_message(*row) for row in rows]

    # A turn's one read and one write ------------------------------------------------------

    @staticmethod
    def window_read(conversation_id: str, size: int) -> tuple[PreparedQuery, dict[str, Any]]:
        """The query of a turn's window — the system messages and the messages of the newest
        ``size`` sequence numbers of ``conversation_id``, found by its key alone (its row need
        not have been read) — to read with other queries at once
        (:func:`~advisors_app.db.prepared.rows_together`); its rows go to :meth:`read_ahead`."""
        check_conversation_id(conversation_id)
        return _WINDOW_BY_KEY, {"key": conversation_id, "span": size}

    @staticmethod
    def read_window(conversation_pk: int, last_sequence: int, size: int) -> ReadAhead:
        """Blocking: :meth:`window_read`'s window of the conversation whose row was read (one
        query on the ``(conversation, sequence)`` index; none when it holds nothing)."""
        if last_sequence <= 0:
            return ReadAhead()
        rows = _WINDOW.rows(conversation=conversation_pk, low=last_sequence - size)
        return DjangoChatMemoryRepository.read_ahead(rows, last_sequence, size)

    @staticmethod
    def read_ahead(rows: list[tuple[Any, ...]], last_sequence: int, size: int) -> ReadAhead:
        """The :class:`~advisors_app.core.memory.turn.ReadAhead` of a window read of ``size``
        messages ending at ``last_sequence``."""
        messages = [_message(*row) for row in _answered(rows)]
        return ReadAhead(
            tuple(m for m in messages if m.message_type is MessageType.SYSTEM),
            tuple(m for m in messages if m.message_type is not MessageType.SYSTEM),
            complete=last_sequence - size <= 0,
        )

    @classmethod
    def write_held(
        cls, conversation_id: str, appends: Sequence[HeldAppend], pending: int | None = None
    ) -> list[ChatMessage]:
        """Blocking, in the caller's transaction: a turn's held appends, in order (the rows
        inserted, with their ids). ``pending``: the id of the turn's pending message
        (:meth:`write_pending`), deleted by the same statement that allocates the first
        append's sequence numbers — which start at its number when nothing was appended after
        it — or on its own when nothing is appended."""
        rows: list[ChatMessage] = []
        for append in appends:
            batch = list(append.messages)
            rows.extend(cls._append(conversation_id, batch, append.replace_system, pending))
            pending = None
        if pending is not None:
            ChatMessage.objects.filter(pk=pending).delete()
        return rows

    @staticmethod
    def write_pending(conversation_id: str, text: str, owner: str) -> int:
        """Blocking, one statement (its own commit, asynchronous: :func:`_insert_pending`):
        store ``text`` as the next user message of ``conversation_id`` (which must exist),
        flagged :data:`TURN_PENDING` with ``owner``; the row's id. Written before a turn runs,
        so a process killed mid-turn leaves it stored."""
        sql = (
            "WITH c AS (UPDATE {conversation} SET last_sequence = last_sequence + 1, "
            "updated_at = %(now)s WHERE conversation_id = %(key)s RETURNING id, last_sequence) "
        )
        return _insert_pending(sql, {"key": conversation_id}, text, owner)

    @staticmethod
    def create_with_pending(
        conversation_id: str,
        text: str,
        owner: str,
        *,
        owner_id: int,
        title: str,
        chain_version_id: int | None,
    ) -> int:
        """Blocking, one statement: create the conversation ``conversation_id`` (of user
        ``owner_id``; its key must be new) holding ``text`` as its first message, pending as
        :meth:`write_pending` stores it; the message's id. A conversation a turn starts is
        listed (``Conversation.listed``: the playground and evaluations create theirs first)."""
        sql = (
            "WITH c AS (INSERT INTO {conversation} (conversation_id, owner_id, title, "
            "chain_version_id, last_sequence, listed, created_at, updated_at) VALUES (%(key)s, "
            "%(owner_id)s, %(title)s, %(version)s, 1, true, %(now)s, %(now)s) "
            "RETURNING id, last_sequence) "
        )
        values = {
            "key": conversation_id,
            "owner_id": owner_id,
            "title": title,
            "version": chain_version_id,
        }
        return _insert_pending(sql, values, text, owner)

    # Helpers --------------------------------------------------------------------------------

    @classmethod
    def _append(
        cls,
        conversation_id: str,
        batch: list[Message],
        replace_system: bool,
        pending: int | None = None,
    ) -> list[ChatMessage]:
        """Insert ``batch`` at the end of the conversation, in the caller's transaction; the
        rows, with their ids on PostgreSQL (``pending``: see :meth:`write_held`)."""
        pk, after = cls._allocate(conversation_id, len(batch), pending)
        if replace_system:
            ChatMessage.objects.filter(conversation_id=pk, message_type=_SYSTEM).delete()
        if not batch:
            return []
        return ChatMessage.objects.bulk_create(
            [_row(pk, after + i, m) for i, m in enumerate(batch, start=1)],
            batch_size=_BATCH_SIZE,
        )

    @staticmethod
    def _allocate(conversation_id: str, count: int, pending: int | None = None) -> tuple[int, int]:
        """Reserve ``count`` sequence numbers: ``(conversation pk, the sequence before them)``.

        One ``UPDATE ... RETURNING``, which also locks the row until the transaction ends, so
        concurrent appends never share numbers; the conversation is created when missing.
        With ``pending`` (a message id) the same statement deletes that message, and when it
        held the conversation's last number the numbers start at it (no gap).
        """
        db = router.db_for_write(Conversation)
        quote = connections[db].ops.quote_name
        meta = Conversation._meta
        last = quote(meta.get_field("last_sequence").column)
        head, step = "", "%s"
        params: list[Any] = [count, timezone.now(), conversation_id]
        if pending is not None:
            head = (
                f"WITH p AS (DELETE FROM {quote(ChatMessage._meta.db_table)} "
                f"WHERE id = %s RETURNING sequence) "
            )
            step = f"%s - (CASE WHEN {last} = (SELECT sequence FROM p) THEN 1 ELSE 0 END)"
            params.insert(0, pending)
        sql = (
            f"{head}UPDATE {quote(meta.db_table)} SET {last} = {last} + {step}, "
            f"{quote(meta.get_field('updated_at').column)} = %s "
            f"WHERE {quote(meta.get_field('conversation_id').column)} = %s "
            f"RETURNING {quote(meta.pk.column)}, {last}"
        )
        with connections[db].cursor() as cursor:
            cursor.execute(sql, params)
            found = cursor.fetchone()
        if found is not None:
            return found[0], found[1] - count
        conversation, _ = Conversation.objects.select_for_update().get_or_create(
            conversation_id=conversation_id
        )
        Conversation.objects.filter(pk=conversation.pk).update(
            last_sequence=conversation.last_sequence + count, updated_at=timezone.now()
        )
        return conversation.pk, conversation.last_sequence

    # Async twins ----------------------------------------------------------------------------

    async def afind_conversation_ids(self) -> list[str]:
        return await db_sync_to_async(self.find_conversation_ids)()

    async def afind_by_conversation_id(self, conversation_id: str) -> list[Message]:
        return await db_sync_to_async(self.find_by_conversation_id)(conversation_id)

    async def asave_all(self, conversation_id: str, messages: Sequence[Message]) -> None:
        await db_sync_to_async(self.save_all)(conversation_id, messages)

    async def adelete_by_conversation_id(self, conversation_id: str) -> None:
        await db_sync_to_async(self.delete_by_conversation_id)(conversation_id)

    async def aappend(
        self, conversation_id: str, messages: Sequence[Message], *, replace_system: bool = False
    ) -> None:
        await db_sync_to_async(self.append)(
            conversation_id, messages, replace_system=replace_system
        )

    async def afind_last(self, conversation_id: str, limit: int) -> list[Message]:
        return await db_sync_to_async(self.find_last)(conversation_id, limit)

    async def afind_system_messages(self, conversation_id: str) -> list[Message]:
        return await db_sync_to_async(self.find_system_messages)(conversation_id)
