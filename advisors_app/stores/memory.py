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

A turn of the turn service reads and writes its conversation through a :class:`TurnScope`
(:meth:`DjangoChatMemoryRepository.open_turn`, entered around each step of the turn with
:meth:`~DjangoChatMemoryRepository.scoped`): the window is read once, with the conversation, in
the service's one thread hop before the chain runs (the system messages and the newest
``TurnScope.PREFETCH`` messages in one query), and the memory advisor's reads of that
conversation are answered from it without a query or a hop; the advisor's ``append`` is held in
the scope and written by :meth:`~DjangoChatMemoryRepository.write_turn` in the service's one
transaction, with the call log. Before that the service adds the turn's outcome to the held
reply's metadata (:meth:`TurnScope.annotate_reply`) and afterwards reads the stored reply's id
from the rows written (:meth:`TurnScope.reply_id`), without a query. The scope lives in a
context variable, so concurrent turns of one conversation each see their own; anything outside a
turn reads and writes as before.

Async twins run the sync methods through :func:`~advisors_app.db.threads.db_sync_to_async`
(thread-sensitive, as Django's own async ORM methods do; a pooled connection goes back after
each), so the event loop never blocks on the database; a
transaction and its row lock cannot span ``await`` points in Django's async ORM.
"""

from __future__ import annotations

import base64
import contextvars
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from django.db import connections, router, transaction
from django.db.models import F, Q, QuerySet
from django.utils import timezone

from advisors_app.core.memory import ChatMemoryRepository, check_conversation_id
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

__all__ = ["DjangoChatMemoryRepository", "TurnScope", "current_scope"]

_FIELDS = ("message_type", "text", "metadata", "tool_calls", "tool_responses", "media")
_SYSTEM = MessageType.SYSTEM.value
_ASSISTANT = MessageType.ASSISTANT.value
_BATCH_SIZE = 1000
#: Extra sequence numbers read by ``find_last`` beyond ``limit`` (room for system messages).
_SPAN_SLACK = 16


@dataclass(eq=False)
class TurnScope:
    """One turn's view of its conversation ``conversation_id`` (a stored key).

    ``system`` and ``tail`` are the prefetched window: the stored system messages and the
    newest non-system messages (oldest first), ``complete`` when ``tail`` reaches the start of
    the conversation; ``system is None``: nothing was read (reads go to the database).
    ``pending`` holds the appends of the turn, ``(messages, replace_system)``, until
    :meth:`DjangoChatMemoryRepository.write_turn` writes them; once written (``closed``),
    appends go straight to the database again. ``written`` holds the rows the turn inserted.
    """

    #: Messages read ahead with the system messages: enough for the default windows
    #: (``MessageWindowChatMemory``'s 20 + 1, ``TokenWindowChatMemory``'s first 32).
    PREFETCH = 48

    conversation_id: str
    system: list[Message] | None = None
    tail: list[Message] = field(default_factory=list)
    complete: bool = False
    pending: list[tuple[list[Message], bool]] = field(default_factory=list)
    closed: bool = False
    written: list[ChatMessage] = field(default_factory=list)
    #: Run by ``write_turn`` once the turn's messages are written, inside its transaction
    #: (session memory queues its compaction there with ``transaction.on_commit``).
    after_write: list[Callable[[], None]] = field(default_factory=list)

    def annotate_reply(self, metadata: dict[str, Any]) -> None:
        """Add ``metadata`` to the reply held for writing: the last assistant message of the
        appends not written yet (no-op when there is none). Keys the reply has keep their
        value (an interrupted reply's ``finish_reason``, say)."""
        for batch, _ in reversed(self.pending):
            for index in range(len(batch) - 1, -1, -1):
                message = batch[index]
                if isinstance(message, AssistantMessage):
                    batch[index] = replace(message, metadata={**metadata, **message.metadata})
                    return

    def reply_id(self) -> int | None:
        """The id of the last assistant message this turn stored (``None``: none)."""
        return next(
            (row.pk for row in reversed(self.written) if row.message_type == _ASSISTANT), None
        )

    def _now(self) -> tuple[list[Message], list[Message]]:
        """``(system, tail)`` with the pending appends applied, as a read after them sees."""
        system, tail = list(self.system or ()), list(self.tail)
        for batch, replace_system in self.pending:
            added = [m for m in batch if m.message_type is MessageType.SYSTEM]
            system = added if replace_system else [*system, *added]
            tail.extend(m for m in batch if m.message_type is not MessageType.SYSTEM)
        return system, tail

    def system_messages(self) -> list[Message] | None:
        """The stored system messages, if the window was read."""
        return None if self.system is None else self._now()[0]

    def last(self, limit: int) -> list[Message] | None:
        """The newest ``limit`` non-system messages, if the window read holds them."""
        if self.system is None:
            return None
        tail = self._now()[1]
        if len(tail) >= limit:
            return tail[len(tail) - limit :] if limit else []
        return tail if self.complete else None


_scope: contextvars.ContextVar[TurnScope | None] = contextvars.ContextVar(
    "advisors_app_turn_scope", default=None
)


def _window(messages: QuerySet[ChatMessage], low: Any) -> QuerySet[ChatMessage]:
    """A turn's window of ``messages``: the system messages and those after sequence ``low``,
    oldest first."""
    return (
        messages.filter(Q(message_type=_SYSTEM) | Q(sequence__gt=low))
        .order_by("sequence")
        .values_list(*_FIELDS)
    )


# A turn's window read (``open_turn``), compiled once (advisors_app.db.prepared).
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


class _Scoped:
    """``with`` block of :meth:`DjangoChatMemoryRepository.scoped` (a class: the turn service
    enters it around every step of a streamed turn, so its cost counts per chunk)."""

    __slots__ = ("_scope", "_token")

    def __init__(self, scope: TurnScope) -> None:
        self._scope = scope

    def __enter__(self) -> None:
        self._token = _scope.set(self._scope)

    def __exit__(self, *exc_info: object) -> None:
        _scope.reset(self._token)


def current_scope(conversation_id: str) -> TurnScope | None:
    """The running turn's scope of ``conversation_id`` not written yet (``None``: none)."""
    return _scope_for(conversation_id)


def _scope_for(conversation_id: str) -> TurnScope | None:
    scope = _scope.get()
    if scope is None or scope.closed or scope.conversation_id != conversation_id:
        return None
    return scope


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
        return [_message(*row) for row in rows]

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
        scope = _scope_for(conversation_id)
        if scope is not None:
            scope.pending.append((list(batch), replace_system))  # written with the turn
            return
        with transaction.atomic():
            self._append(conversation_id, batch, replace_system)

    def find_last(self, conversation_id: str, limit: int) -> list[Message]:
        check_conversation_id(conversation_id)
        check_limit(limit)
        scope = _scope_for(conversation_id)
        if scope is not None:
            found = scope.last(limit)
            if found is not None:
                return found
            self._flush(scope)
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
        scope = _scope_for(conversation_id)
        if scope is not None:
            found = scope.system_messages()
            if found is not None:
                return found
            self._flush(scope)
        rows = (
            ChatMessage.objects.filter(
                conversation__conversation_id=conversation_id, message_type=_SYSTEM
            )
            .order_by("sequence")
            .values_list(*_FIELDS)
        )
        return [_message(*row) for row in rows]

    # One turn, one read and one write ------------------------------------------------------

    def open_turn(
        self,
        conversation_id: str,
        *,
        conversation_pk: int | None,
        last_sequence: int,
        prefetch: int = TurnScope.PREFETCH,
    ) -> TurnScope:
        """A :class:`TurnScope` for a turn of ``conversation_id`` whose window is read now.

        Blocking. ``conversation_pk=None`` or ``last_sequence=0``: the conversation holds
        nothing, no query; else one query, the system messages and the messages of the newest
        ``prefetch`` sequence numbers (the ``(conversation, sequence)`` index): what the
        chain's memory reads first (a read the scope cannot answer goes to the database).
        """
        check_conversation_id(conversation_id)
        if conversation_pk is None or last_sequence <= 0:
            return self.scope_of(conversation_id, last_sequence=0, prefetch=prefetch, rows=[])
        rows = _WINDOW.rows(conversation=conversation_pk, low=last_sequence - prefetch)
        return self.scope_of(conversation_id, last_sequence, prefetch, rows)

    @staticmethod
    def window_read(conversation_id: str, prefetch: int) -> tuple[PreparedQuery, dict[str, Any]]:
        """:meth:`open_turn`'s query by the conversation's key alone — its row need not have
        been read — to read with other queries at once
        (:func:`~advisors_app.db.prepared.rows_together`); its rows go to :meth:`scope_of`."""
        check_conversation_id(conversation_id)
        return _WINDOW_BY_KEY, {"key": conversation_id, "span": prefetch}

    @staticmethod
    def scope_of(
        conversation_id: str, last_sequence: int, prefetch: int, rows: list[tuple[Any, ...]]
    ) -> TurnScope:
        """The scope of a window read of ``prefetch`` messages ending at ``last_sequence``."""
        messages = [_message(*row) for row in rows]
        scope = TurnScope(conversation_id)
        scope.system = [m for m in messages if m.message_type is MessageType.SYSTEM]
        scope.tail = [m for m in messages if m.message_type is not MessageType.SYSTEM]
        scope.complete = last_sequence - prefetch <= 0
        return scope

    @staticmethod
    def scoped(scope: TurnScope) -> _Scoped:
        """Make ``scope`` the current turn's inside the ``with`` block (this context only)."""
        return _Scoped(scope)

    def write_turn(self, scope: TurnScope) -> list[ChatMessage]:
        """Write the appends held in ``scope`` (the rows inserted) and close it: later appends
        go to the database at once. Call it inside the transaction that ends the turn."""
        scope.closed = True
        rows: list[ChatMessage] = []
        for batch, replace_system in scope.pending:
            rows.extend(self._append(scope.conversation_id, batch, replace_system))
        scope.pending.clear()
        scope.written.extend(rows)
        callbacks, scope.after_write = scope.after_write, []
        for callback in callbacks:
            callback()
        return rows

    def _flush(self, scope: TurnScope) -> None:
        """Write what ``scope`` holds before a read it cannot answer (so the read sees it)."""
        if scope.pending:
            with transaction.atomic():
                for batch, replace_system in scope.pending:
                    scope.written.extend(self._append(scope.conversation_id, batch, replace_system))
                scope.pending.clear()
        scope.system = None

    # Helpers --------------------------------------------------------------------------------

    @classmethod
    def _append(
        cls, conversation_id: str, batch: list[Message], replace_system: bool
    ) -> list[ChatMessage]:
        """Insert ``batch`` at the end of the conversation, in the caller's transaction; the
        rows, with their ids on PostgreSQL."""
        pk, after = cls._allocate(conversation_id, len(batch))
        if replace_system:
            ChatMessage.objects.filter(conversation_id=pk, message_type=_SYSTEM).delete()
        if not batch:
            return []
        return ChatMessage.objects.bulk_create(
            [_row(pk, after + i, m) for i, m in enumerate(batch, start=1)],
            batch_size=_BATCH_SIZE,
        )

    @staticmethod
    def _allocate(conversation_id: str, count: int) -> tuple[int, int]:
        """Reserve ``count`` sequence numbers: ``(conversation pk, the sequence before them)``.

        One ``UPDATE ... RETURNING``, which also locks the row until the transaction ends, so
        concurrent appends never share numbers; the conversation is created when missing.
        """
        db = router.db_for_write(Conversation)
        quote = connections[db].ops.quote_name
        meta = Conversation._meta
        last = quote(meta.get_field("last_sequence").column)
        sql = (
            f"UPDATE {quote(meta.db_table)} SET {last} = {last} + %s, "
            f"{quote(meta.get_field('updated_at').column)} = %s "
            f"WHERE {quote(meta.get_field('conversation_id').column)} = %s "
            f"RETURNING {quote(meta.pk.column)}, {last}"
        )
        with connections[db].cursor() as cursor:
            cursor.execute(sql, [count, timezone.now(), conversation_id])
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

    # Inside a turn's scope these answer from it, without a thread hop.

    async def aappend(
        self, conversation_id: str, messages: Sequence[Message], *, replace_system: bool = False
    ) -> None:
        if _scope_for(conversation_id) is not None:
            self.append(conversation_id, messages, replace_system=replace_system)
            return
        await db_sync_to_async(self.append)(
            conversation_id, messages, replace_system=replace_system
        )

    async def afind_last(self, conversation_id: str, limit: int) -> list[Message]:
        scope = _scope_for(conversation_id)
        if scope is not None:
            check_limit(limit)
            found = scope.last(limit)
            if found is not None:
                return found
        return await db_sync_to_async(self.find_last)(conversation_id, limit)

    async def afind_system_messages(self, conversation_id: str) -> list[Message]:
        scope = _scope_for(conversation_id)
        found = scope.system_messages() if scope is not None else None
        if found is not None:
            return found
        return await db_sync_to_async(self.find_system_messages)(conversation_id)
