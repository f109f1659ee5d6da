"""Answers turned into dataset items: "add to dataset" from call logs and rated replies
(issue 22, "Feedback").

Each selected turn is one stored assistant reply — a call log's is found by the trace id the
reply keeps in its metadata (:data:`~advisors_app.memory.conversations.TRACE_ID`) in the call log's
conversation; a score's is the reply it judges — and becomes one item:

- ``key``: ``trace-<trace id>`` (``message-<id>`` for a reply stored before replies were
  tagged), so the same turn added again, from its call log or from one of its scores, is the
  same item: unchanged it stays, changed it gets a new version (the dataset import's upsert,
  :func:`advisors_app.evaluation.datasets.import_items`).
- ``input``: ``{"message"}``: the user's message before the reply; with ``history``, also the
  conversation's earlier user and assistant messages with text (at most
  :data:`MAX_HISTORY_MESSAGES`, the latest) as ``[{"role", "content"}]``. No ``params``: a
  stored turn does not keep them.
- ``expected``: ``{"output"}``: the reply's text, or its **correction**: the one typed in the
  admin's form (a single turn only), else the comment of the newest score under the key
  :data:`~advisors_app.evaluation.feedback.CORRECTION` on the reply, a reviewer's before the
  user's. With ``documents_key`` (the demo's dataset uses ``topic``), also ``{"documents": {key:
  [accepted values]}}``: that metadata value of each source the reply cited (the stored
  reply's ``sources``, their chunks' ``Document`` rows; ``source`` and ``title`` are also read
  from the cited source itself), for ``retrieval_hit_at_k`` and ``mrr``.

A turn that cannot become an item (no reply found, its conversation deleted, no user message
before it, nothing to expect) is skipped with the reason, the others are added.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from advisors_app.core.messages import MessageType
from advisors_app.evaluation.datasets import ImportReport, import_items, parse_items
from advisors_app.evaluation.feedback import CORRECTION
from advisors_app.memory.conversations import TRACE_ID
from advisors_app.models import CallLog, ChatMessage, Dataset, Document, Score
from advisors_app.stores.memory import TURN_PENDING

__all__ = [
    "MAX_HISTORY_MESSAGES",
    "CurationReport",
    "SkippedTurn",
    "TurnOptions",
    "add_replies",
    "correction_of",
    "item_key",
    "replies_of_call_logs",
    "replies_of_scores",
    "reply_of_call_log",
    "turn_item",
    "user_message_of",
]

#: The latest earlier messages an item's ``history`` keeps.
MAX_HISTORY_MESSAGES = 50
_ROLES = {MessageType.USER.value: "user", MessageType.ASSISTANT.value: "assistant"}


class SkippedTurn(Exception):
    """Raised when a turn cannot become a dataset item (the message says why)."""


@dataclass(frozen=True, slots=True)
class TurnOptions:
    """How turns become items: the earlier messages as ``history``; the cited sources'
    metadata value under ``documents_key`` (blank: none) as ``expected.documents``; a
    ``correction`` typed for a single turn; ``tags``."""

    history: bool = False
    documents_key: str = ""
    correction: str = ""
    tags: tuple[str, ...] = ()


@dataclass
class CurationReport:
    """What :func:`add_replies` did: the import's report by key, and the turns skipped (why)."""

    imported: ImportReport = field(default_factory=ImportReport)
    skipped: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        skipped = f", {len(self.skipped)} skipped" if self.skipped else ""
        return f"{self.imported}{skipped}"


def _trace_id(reply: ChatMessage) -> str:
    value = reply.metadata.get(TRACE_ID) if isinstance(reply.metadata, dict) else None
    return value if isinstance(value, str) else ""


def item_key(reply: ChatMessage) -> str:
    """The stable item key of a reply's turn: ``trace-<trace id>``, else ``message-<id>``."""
    trace_id = _trace_id(reply)
    return f"trace-{trace_id}" if trace_id else f"message-{reply.pk}"


def reply_of_call_log(log: CallLog) -> ChatMessage | None:
    """The stored reply of a call log's turn (the last assistant message of its conversation
    tagged with its trace id), or ``None``: no conversation, deleted, or nothing stored."""
    if not log.conversation_id:
        return None
    return (
        ChatMessage.objects.filter(
            conversation__conversation_id=log.conversation_id,
            message_type=MessageType.ASSISTANT.value,
            **{f"metadata__{TRACE_ID}": log.trace_id},
        )
        .order_by("-sequence")
        .first()
    )


def replies_of_call_logs(logs: Iterable[CallLog]) -> tuple[list[ChatMessage], list[str]]:
    """The stored replies of ``logs`` (once each, in order), and why the others have none."""
    replies: dict[int, ChatMessage] = {}
    skipped = []
    for log in logs:
        reply = reply_of_call_log(log)
        if reply is None:
            skipped.append(
                f"call log {log.trace_id}: no stored reply (a turn without a conversation, "
                "or its conversation was deleted)"
            )
        else:
            replies.setdefault(reply.pk, reply)
    return list(replies.values()), skipped


def replies_of_scores(scores: Iterable[Score]) -> tuple[list[ChatMessage], list[str]]:
    """The replies ``scores`` judge (once each, in order), and the scores without one."""
    replies: dict[int, ChatMessage] = {}
    skipped = []
    for score in scores:
        if score.message is None:
            skipped.append(f"score {score.pk} ({score.key}): its reply was deleted")
        else:
            replies.setdefault(score.message.pk, score.message)
    return list(replies.values()), skipped


def user_message_of(reply: ChatMessage) -> ChatMessage | None:
    """The user's message the reply answers: the last one before it in its conversation."""
    return (
        ChatMessage.objects.filter(
            conversation_id=reply.conversation_id,
            sequence__lt=reply.sequence,
            message_type=MessageType.USER.value,
        )
        .order_by("-sequence")
        .first()
    )


def _history(asked: ChatMessage) -> list[dict[str, str]]:
    earlier = (
        ChatMessage.objects.filter(
            conversation_id=asked.conversation_id,
            sequence__lt=asked.sequence,
            message_type__in=list(_ROLES),
        )
        .exclude(text="")
        # Messages never answered (their turn's process died) are no history (issue 36).
        .exclude(metadata__has_key=TURN_PENDING)
        .order_by("-sequence")
        .values_list("message_type", "text")[:MAX_HISTORY_MESSAGES]
    )
    return [{"role": _ROLES[kind], "content": text} for kind, text in reversed(earlier)]


def correction_of(reply: ChatMessage) -> str:
    """The newest correction on ``reply`` (a reviewer's before the user's), or ``""``."""
    corrections = Score.objects.filter(message_id=reply.pk, key=CORRECTION).exclude(comment="")
    for source in (Score.Source.REVIEWER, Score.Source.USER, Score.Source.API):
        found = corrections.filter(source=source).order_by("-updated_at", "-pk").first()
        if found is not None:
            return found.comment
    return ""


def _accepted_values(reply: ChatMessage, key: str) -> list[Any]:
    """``key``'s metadata values of the sources the reply cited, in citation order."""
    sources = reply.metadata.get("sources") if isinstance(reply.metadata, dict) else None
    cited = [s for s in sources or [] if isinstance(s, dict)]
    ids = [s["document_id"] for s in cited if s.get("document_id")]
    rows = dict(Document.objects.filter(pk__in=ids).values_list("pk", "metadata"))
    values: list[Any] = []
    for source in cited:
        metadata = rows.get(source.get("document_id")) or {}
        value = metadata.get(key) if isinstance(metadata, dict) else None
        if value is None and key in ("source", "title"):
            value = source.get(key) or None
        for one in value if isinstance(value, list) else [value]:
            if one is not None and one not in values:
                values.append(one)
    return values


def turn_item(reply: ChatMessage, options: TurnOptions) -> dict[str, Any]:
    """The dataset item (import shape, see the module docstring) of ``reply``'s turn. Raises
    :class:`SkippedTurn` when there is none to make."""
    if reply.message_type != MessageType.ASSISTANT.value:
        raise SkippedTurn(f"message {reply.pk} is not an assistant reply")
    asked = user_message_of(reply)
    if asked is None or not asked.text.strip():
        raise SkippedTurn(f"reply {reply.pk}: no user message with text before it")
    item_input: dict[str, Any] = {"message": asked.text}
    if options.history and (history := _history(asked)):
        item_input["history"] = history
    expected: dict[str, Any] = {}
    output = options.correction or correction_of(reply) or reply.text
    if output.strip():
        expected["output"] = output
    if options.documents_key:
        accepted = _accepted_values(reply, options.documents_key)
        if accepted:
            expected["documents"] = {options.documents_key: accepted}
    if not expected:
        raise SkippedTurn(f"reply {reply.pk}: no text, correction or cited source to expect")
    return {
        "key": item_key(reply),
        "input": item_input,
        "expected": expected,
        "tags": list(options.tags),
    }


def add_replies(
    dataset: Dataset, replies: Iterable[ChatMessage], options: TurnOptions
) -> CurationReport:
    """Upsert the items of ``replies``' turns into ``dataset`` (blocking; one transaction for
    the items made). Raises ``ValueError`` for a typed correction with more than one reply."""
    replies = list(replies)
    if options.correction and len(replies) != 1:
        raise ValueError("A typed correction is the expected output of one turn: choose one.")
    report = CurationReport()
    items = []
    for reply in replies:
        try:
            item = turn_item(reply, options)
            items += parse_items([item])  # the import's checks, one turn at a time
        except (SkippedTurn, ValueError) as exc:
            report.skipped.append(str(exc))
    if items:
        report.imported = import_items(dataset, items)
    return report
