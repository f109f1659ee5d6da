"""``DjangoChatMemoryRepository``: the chat-memory contract on the Django ORM (PostgreSQL).

Spring AI ``JdbcChatMemoryRepository``, with its defects fixed (reference §5.3): tool calls and
tool responses are stored, not dropped (defect 21); conversation ids may have 255 characters;
``append`` adds a turn in O(turn) instead of deleting and re-inserting the conversation
(defect 19); concurrent appends to one conversation never interleave or lose messages: each
takes the conversation's row lock (``SELECT ... FOR UPDATE``) and allocates its sequence
numbers from ``Conversation.last_sequence`` in the same transaction; ``find_last`` reads the
newest messages from a bounded range of the ``(conversation, sequence)`` index, O(limit)
however long the conversation is. Messages read back carry no storage metadata (Spring AI adds a
timestamp that breaks de-duplication, defect 16).

A reply appended with a trace id in its metadata (``"trace_id"``, which the memory advisors and
the turn service write from the context's ``TRACE_ID``) leaves its row id behind:
:meth:`DjangoChatMemoryRepository.take_reply_id` hands it to the turn that stored it, once, so
the turn service answers with the stored reply's id without reading it back.

Async twins run the sync methods through ``asgiref.sync.sync_to_async`` (thread-sensitive, as
Django's own async ORM methods do), so the event loop never blocks on the database; a
transaction and its row lock cannot span ``await`` points in Django's async ORM.
"""

from __future__ import annotations

import base64
import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from asgiref.sync import sync_to_async
from django.db import transaction
from django.utils import timezone

from advisors_app.core.attributes import TRACE_ID_METADATA
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
from advisors_app.models import ChatMessage, Conversation

__all__ = ["DjangoChatMemoryRepository"]

_FIELDS = ("message_type", "text", "metadata", "tool_calls", "tool_responses", "media")
_SYSTEM = MessageType.SYSTEM.value
_ASSISTANT = MessageType.ASSISTANT.value
_BATCH_SIZE = 1000
#: Extra sequence numbers read by ``find_last`` beyond ``limit`` (room for system messages).
_SPAN_SLACK = 16


class _StoredReplies:
    """Row ids of replies stored with a trace id, by trace id, until their turn takes them.

    One per process, shared by every repository instance and thread. A turn stores its replies
    in this process (the chain runs where the service does) and takes the id when it finishes;
    ids nobody takes (a reply stored outside the turn service) are dropped oldest first beyond
    ``limit``.
    """

    def __init__(self, limit: int = 10_000) -> None:
        self._ids: OrderedDict[str, int] = OrderedDict()
        self._lock = threading.Lock()
        self._limit = limit

    def record(self, rows: Sequence[ChatMessage]) -> None:
        """Remember the newest assistant row of each trace id among ``rows`` (just inserted)."""
        for row in rows:
            trace_id = row.metadata.get(TRACE_ID_METADATA)
            if row.message_type != _ASSISTANT or not isinstance(trace_id, str) or row.pk is None:
                continue
            with self._lock:
                self._ids[trace_id] = row.pk
                self._ids.move_to_end(trace_id)
                while len(self._ids) > self._limit:
                    self._ids.popitem(last=False)

    def take(self, trace_id: str) -> int | None:
        with self._lock:
            return self._ids.pop(trace_id, None)


_stored_replies = _StoredReplies()


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


def _row(conversation: Conversation, sequence: int, message: Message) -> ChatMessage:
    row = ChatMessage(
        conversation=conversation,
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
            conversation = self._locked(conversation_id)
            ChatMessage.objects.filter(conversation=conversation).delete()
            self._insert(conversation, 0, batch)

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
            conversation = self._locked(conversation_id)
            if replace_system:
                ChatMessage.objects.filter(conversation=conversation, message_type=_SYSTEM).delete()
            rows = self._insert(conversation, conversation.last_sequence, batch)
        _stored_replies.record(rows)  # committed (or part of the caller's transaction)

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

    @staticmethod
    def take_reply_id(trace_id: str) -> int | None:
        """The id (``ChatMessage`` primary key) of the reply that ``append`` stored last with
        ``trace_id`` in its metadata, in this process; ``None`` when none was. Each id is
        handed out once: a later call for the same trace id returns ``None``."""
        return _stored_replies.take(trace_id)

    # Helpers --------------------------------------------------------------------------------

    @staticmethod
    def _locked(conversation_id: str) -> Conversation:
        """The conversation row, created if missing, locked until the transaction ends."""
        conversation, _ = Conversation.objects.select_for_update().get_or_create(
            conversation_id=conversation_id
        )
        return conversation

    @staticmethod
    def _insert(conversation: Conversation, after: int, batch: list[Message]) -> list[ChatMessage]:
        """Insert ``batch`` after sequence ``after``; the rows, with their ids on PostgreSQL."""
        rows = ChatMessage.objects.bulk_create(
            [_row(conversation, after + i, m) for i, m in enumerate(batch, start=1)],
            batch_size=_BATCH_SIZE,
        )
        Conversation.objects.filter(pk=conversation.pk).update(
            last_sequence=after + len(batch), updated_at=timezone.now()
        )
        return rows

    # Async twins ----------------------------------------------------------------------------

    async def afind_conversation_ids(self) -> list[str]:
        return await sync_to_async(self.find_conversation_ids)()

    async def afind_by_conversation_id(self, conversation_id: str) -> list[Message]:
        return await sync_to_async(self.find_by_conversation_id)(conversation_id)

    async def asave_all(self, conversation_id: str, messages: Sequence[Message]) -> None:
        await sync_to_async(self.save_all)(conversation_id, messages)

    async def adelete_by_conversation_id(self, conversation_id: str) -> None:
        await sync_to_async(self.delete_by_conversation_id)(conversation_id)

    async def aappend(
        self, conversation_id: str, messages: Sequence[Message], *, replace_system: bool = False
    ) -> None:
        await sync_to_async(self.append)(conversation_id, messages, replace_system=replace_system)

    async def afind_last(self, conversation_id: str, limit: int) -> list[Message]:
        return await sync_to_async(self.find_last)(conversation_id, limit)

    async def afind_system_messages(self, conversation_id: str) -> list[Message]:
        return await sync_to_async(self.find_system_messages)(conversation_id)
