"""``DjangoSessionRepository``: session memory on PostgreSQL, in the turn pipeline.

The log is the conversation's ``ChatMessage`` rows (append-only: nothing here updates or
deletes one) and its :class:`~advisors_app.models.ConversationBoundary` rows. How it fits the
turn pipeline (DESIGN §4, :mod:`advisors_app.turn`):

* **the view** is read in one query (:meth:`~DjangoSessionRepository.load_view`): the
  conversation, its newest boundary (a lateral join on the ``(conversation, covers_up_to)``
  index) and the messages after it with the stored system messages, aggregated as JSON — the
  turn's one extra query, made once per turn by ``SessionTurnAdvisor``;
* **the turn's messages** are handed by the session advisors to the turn's ``TurnMemory`` and
  written by the turn in its one transaction, with the call log; outside a turn :meth:`aappend`
  writes them through :class:`~advisors_app.stores.memory.DjangoChatMemoryRepository`, in a
  transaction of their own;
* **compaction after a turn** is queued as the :data:`~advisors_app.memory.compaction.
  compact_conversation` task once the turn committed (the turn's after-commit stage calls
  :meth:`~DjangoSessionRepository.queue_compaction`): only a committed turn queues it, and the
  user does not wait; outside a turn :meth:`arequest_compaction` queues it on commit;
* **a boundary** is appended in its own transaction, under the conversation's row lock, only if
  the newest boundary is still the one the compaction read (``after``) and it covers no
  sequence past ``Conversation.last_sequence``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import datetime
from functools import partial
from typing import Any

from asgiref.sync import sync_to_async
from django.db import connections, router, transaction

from advisors_app.core.memory import Boundary, SessionRepository, SessionView, check_conversation_id
from advisors_app.core.messages import Message, MessageType
from advisors_app.db.threads import db_sync_to_async
from advisors_app.models import ChatMessage, Conversation, ConversationBoundary

from .memory import DjangoChatMemoryRepository, _message, unanswered

__all__ = ["DjangoSessionRepository"]

_messages = DjangoChatMemoryRepository()
_SYSTEM = MessageType.SYSTEM.value


def _view_sql(quote: Callable[[str], str]) -> str:
    conversation = quote(Conversation._meta.db_table)
    message = quote(ChatMessage._meta.db_table)
    boundary = quote(ConversationBoundary._meta.db_table)
    return f"""
SELECT c.id, c.last_sequence, b.covers_up_to, b.summary, b.kind, b.model, b.usage, b.created_at,
  COALESCE((
    SELECT json_agg(json_build_array(m.sequence, m.message_type, m.text, m.metadata,
                                     m.tool_calls, m.tool_responses, m.media) ORDER BY m.sequence)
    FROM {message} m
    WHERE m.conversation_id = c.id
      AND (m.message_type = %s OR m.sequence > COALESCE(b.covers_up_to, 0))
  ), '[]'::json)
FROM {conversation} c
LEFT JOIN LATERAL (
  SELECT x.covers_up_to, x.summary, x.kind, x.model, x.usage, x.created_at
  FROM {boundary} x WHERE x.conversation_id = c.id
  ORDER BY x.covers_up_to DESC, x.id DESC LIMIT 1
) b ON TRUE
WHERE c.conversation_id = %s
"""


class DjangoSessionRepository(SessionRepository):
    """Sessions in ``Conversation``/``ChatMessage``/``ConversationBoundary`` rows.

    ``policy`` is the JSON compaction policy (:func:`advisors_app.memory.compaction.build_policy`)
    the queued task compacts with; ``None``: compactions requested outside a task queue run at
    once (the core default). Stateless otherwise: one instance serves every request.
    """

    def __init__(
        self,
        policy: Mapping[str, Any] | None = None,
        *,
        enqueue: Callable[[str, dict[str, Any]], None] | None = None,
    ) -> None:
        self.policy = dict(policy) if policy is not None else None
        #: Queues the compaction task (``(conversation key, policy)``; see
        #: :func:`advisors_app.memory.compaction.enqueue_compaction`), handed in so the store
        #: does not import the task module that imports it.
        self._enqueue = enqueue

    # -- reads -----------------------------------------------------------------------------------

    def load_view(self, conversation_id: str) -> SessionView:
        """Blocking: the view of ``conversation_id`` in one query (empty when unknown)."""
        check_conversation_id(conversation_id)
        alias = router.db_for_read(ChatMessage)
        connection = connections[alias]
        with connection.cursor() as cursor:
            cursor.execute(_view_sql(connection.ops.quote_name), [_SYSTEM, conversation_id])
            row = cursor.fetchone()
        if row is None:
            return SessionView()
        _, last, covers, summary, kind, model, usage, created_at, rows = row
        boundary = None
        if covers is not None:
            boundary = Boundary(
                int(covers), summary or "", kind, model or "", usage, _aware(created_at)
            )
        system: list[Message] = []
        messages: list[Message] = []
        positions: list[int] = []
        for sequence, *fields in rows:
            if unanswered(fields[2]):  # a pending turn's message is not history
                continue
            message = _message(*fields)
            if message.message_type is MessageType.SYSTEM:
                system.append(message)
            else:
                messages.append(message)
                positions.append(int(sequence))
        return SessionView(tuple(system), boundary, tuple(messages), tuple(positions), int(last))

    async def aload_view(self, conversation_id: str) -> SessionView:
        return await db_sync_to_async(self.load_view)(conversation_id)

    # -- writes ----------------------------------------------------------------------------------

    async def aappend(self, conversation_id: str, messages: Sequence[Message]) -> None:
        """Append a turn's messages at once (a turn's are written by the turn)."""
        if messages:
            await _messages.aappend(conversation_id, messages)

    def append_boundary(self, conversation_id: str, boundary: Boundary, *, after: int) -> bool:
        """Blocking :meth:`aappend_boundary`."""
        check_conversation_id(conversation_id)
        with transaction.atomic():
            found = (
                Conversation.objects.select_for_update()
                .filter(conversation_id=conversation_id)
                .values_list("pk", "last_sequence")
                .first()
            )
            if found is None:
                raise ValueError(f"no conversation {conversation_id!r} to compact")
            pk, last = found
            newest = (
                ConversationBoundary.objects.filter(conversation_id=pk)
                .order_by("-covers_up_to")
                .values_list("covers_up_to", flat=True)
                .first()
            )
            if (newest or 0) != after:
                return False
            if boundary.covers_up_to > last:
                raise ValueError(
                    f"a boundary covering up to sequence {boundary.covers_up_to} is past the end "
                    f"of conversation {conversation_id!r} (last sequence {last})"
                )
            ConversationBoundary.objects.create(
                conversation_id=pk,
                kind=boundary.kind,
                covers_up_to=boundary.covers_up_to,
                summary=boundary.summary,
                model=boundary.model[:200],
                usage=dict(boundary.usage) if boundary.usage is not None else None,
                created_at=boundary.created_at,
            )
        return True

    async def aappend_boundary(
        self, conversation_id: str, boundary: Boundary, *, after: int
    ) -> bool:
        return await db_sync_to_async(self.append_boundary)(conversation_id, boundary, after=after)

    # -- compaction after a turn -------------------------------------------------------------------

    async def arequest_compaction(
        self, conversation_id: str, run: Callable[[], Awaitable[Any]]
    ) -> None:
        """Queue the compaction task once the caller's transaction commits (at once outside
        one); without a policy or a queue, run ``run`` now."""
        if self.policy is None or self._enqueue is None:
            await run()
            return
        enqueue = partial(self._enqueue, conversation_id, self.policy)
        await sync_to_async(transaction.on_commit)(enqueue)

    @property
    def queues_compaction(self) -> bool:
        """Whether compactions go to the task queue (a policy and a queue were given)."""
        return self.policy is not None and self._enqueue is not None

    def queue_compaction(self, conversation_id: str) -> None:
        """Blocking: queue the compaction task of ``conversation_id`` now (a committed turn
        asked for it; see :attr:`queues_compaction`)."""
        if self.policy is not None and self._enqueue is not None:
            self._enqueue(conversation_id, self.policy)


def _aware(value: Any) -> datetime:
    if isinstance(value, datetime):
        return value
    return datetime.fromisoformat(str(value))
