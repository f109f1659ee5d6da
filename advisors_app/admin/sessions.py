"""Session memory in the conversation admin: boundary events in the transcript, "compact now".

The transcript (:class:`~advisors_app.admin.logs.ChatMessageInline`) renders with
:class:`TranscriptFormSet`, which hands each message's form the boundaries that cover up to it,
so a compaction shows in place, right after the last message that left the model's view: its
kind, summary (folded when long), model, usage and time. The messages themselves are never
changed by a compaction, so the transcript stays the whole log.

"Compact now" (the changelist action and the button on a conversation's page) calls
:func:`advisors_app.memory.compaction.compact_now` once per conversation, forced, with the policy of
the chain version the conversation started on; :func:`compact_conversation_now` says what came of
it in one line.
"""

from __future__ import annotations

import bisect
import logging
from collections.abc import Sequence
from typing import Any

from django.contrib import messages
from django.forms import BaseInlineFormSet
from django.utils.functional import cached_property

from advisors_app.admin.traces import usage_line
from advisors_app.memory.compaction import compact_now, policy_from_snapshot
from advisors_app.memory.conversations import public_conversation_id
from advisors_app.models import Conversation, ConversationBoundary
from advisors_app.security.redaction import redact

__all__ = [
    "FOLD_SUMMARY_CHARS",
    "TranscriptFormSet",
    "boundary_details",
    "compact_conversation_now",
]

logger = logging.getLogger("advisors_app.sessions")

#: Summaries longer than this many characters start folded (a ``<details>`` element).
FOLD_SUMMARY_CHARS = 400
_PREVIEW_CHARS = 120


def boundary_details(boundary: ConversationBoundary) -> dict[str, Any]:
    """What the transcript shows of ``boundary``: ``kind``, ``covers_up_to``, ``summary`` (the
    whole text; the template escapes it), ``preview`` (its first line, clipped to 120
    characters, when ``folded``), ``model``, ``usage`` (one line, ``""`` when no model was
    called) and ``created_at``."""
    summary = boundary.summary
    folded = len(summary) > FOLD_SUMMARY_CHARS
    preview = ""
    if folded:
        first = " ".join(summary.split())
        preview = first if len(first) <= _PREVIEW_CHARS else first[: _PREVIEW_CHARS - 1] + "…"
    return {
        "kind": boundary.kind,
        "covers_up_to": boundary.covers_up_to,
        "summary": summary,
        "folded": folded,
        "preview": preview,
        "model": boundary.model,
        "usage": usage_line(boundary.usage),
        "created_at": boundary.created_at,
    }


class TranscriptFormSet(BaseInlineFormSet):
    """The transcript's formset: each form gets ``boundaries``, the :func:`boundary_details` of
    the boundaries shown right after its message (one query for all of them).

    A boundary goes after the message it covers up to; should that sequence have no message,
    after the nearest one before it (or the first message).
    """

    def _construct_form(self, i: int, **kwargs: Any) -> Any:
        form = super()._construct_form(i, **kwargs)
        sequence = getattr(form.instance, "sequence", None)
        form.boundaries = self._boundaries_after.get(sequence, ())
        return form

    @cached_property
    def _boundaries_after(self) -> dict[int, list[dict[str, Any]]]:
        if self.instance.pk is None:
            return {}
        # The formset's own (cached) queryset: no second query for the messages.
        sequences: Sequence[int] = [message.sequence for message in self.get_queryset()]
        if not sequences:
            return {}
        placed: dict[int, list[dict[str, Any]]] = {}
        boundaries = ConversationBoundary.objects.filter(conversation=self.instance).order_by(
            "covers_up_to", "pk"
        )
        for boundary in boundaries:
            at = bisect.bisect_right(sequences, boundary.covers_up_to) - 1
            placed.setdefault(sequences[max(at, 0)], []).append(boundary_details(boundary))
        return placed


def compact_conversation_now(conversation: Conversation) -> tuple[int, str]:
    """Compact ``conversation`` now (forced, its chain version's policy); the outcome as a
    ``django.contrib.messages`` level and a line naming the conversation: compacted (up to
    which message), nothing to compact, no session memory in its chain, or the error
    (redacted: a provider's error may quote a key)."""
    # Led by a fixed word: the admin capitalises a message's first letter (capfirst), which
    # would misquote an id ("rest-long-1" shown as "Rest-long-1").
    name = f"Conversation {public_conversation_id(conversation.conversation_id)}"
    version = conversation.chain_version
    try:
        policy = policy_from_snapshot(version.snapshot) if version is not None else None
        if policy is None:
            return (
                messages.WARNING,
                f"{name}: not compacted, its chain has no session memory "
                "(no session_memory advisor in the version it started on).",
            )
        result = compact_now(conversation.conversation_id, force=True, policy=policy)
    except Exception as exc:
        logger.exception("compact now: conversation %r", conversation.conversation_id)
        return messages.ERROR, redact(f"{name}: compaction failed: {type(exc).__name__}: {exc}")
    if result.boundary is None:
        return messages.INFO, f"{name}: nothing to compact (only the turns kept verbatim)."
    covered = len(result.covered)
    return (
        messages.SUCCESS,
        f"{name}: compacted up to message #{result.boundary.covers_up_to} "
        f"({covered} message{'s' if covered != 1 else ''} left the model's view).",
    )
