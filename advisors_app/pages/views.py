"""The chat page (``/chat/``) and the staff trace view it opens in its drawer.

The page is a Django template with a small script (``static/advisors_app/chat.js``, no build
step): conversations, the transcript of the open one and the chain list are rendered here, on
the server; replies stream over the websocket (:mod:`advisors_app.channels.consumers`). Each stored
reply's turn metadata (sources, tool calls, usage, timings) goes to the script as JSON
(``json_script``), which draws it as it drew the live reply's frames. Only the
caller's own conversations are listed or opened (another user's id is a 404, as an id never
used). The trace view is JSON for staff with the ``view_calllog`` permission: the per-advisor
trace of one turn, by the trace id its ``start``/``done`` frames carry.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.db.models import QuerySet
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render, resolve_url
from django.urls import NoReverseMatch, reverse
from django.utils import timezone
from django.views.decorators.http import require_GET

from advisors_app.admin.traces import trace_rows
from advisors_app.api.permissions import sees_chain_configuration
from advisors_app.conf import app_settings
from advisors_app.core.memory import APPROVAL_PENDING
from advisors_app.core.messages import MessageType
from advisors_app.memory.conversations import (
    TRACE_ID,
    find_conversation,
    listed_conversations,
    public_conversation_id,
)
from advisors_app.memory.pending import INTERRUPTED_STATE, PENDING_STATE, message_state
from advisors_app.models import (
    PRODUCTION,
    AdvisorChain,
    CallLog,
    ChatMessage,
    Score,
    ToolApproval,
)
from advisors_app.models.scores import REASONS

__all__ = ["chat", "trace"]

#: Conversations listed in the sidebar (newest first).
CONVERSATION_LIST_SIZE = 100


def _reverse_or_none(name: str, *args: Any) -> str | None:
    """The URL of ``name``, or ``None`` where the project does not route it (admin, logout)."""
    try:
        return reverse(name, args=args)
    except NoReverseMatch:
        return None


#: The keys of a stored reply's metadata the page shows again (what the turn stored with it:
#: ``TurnOutcome.reply_metadata`` plus ``interrupted``). Other keys stay on the server.
REPLY_DETAIL_KEYS = (
    TRACE_ID,
    "version",
    "sources",
    "tools",
    "usage",
    "finish_reason",
    "finish_category",
    "timings",
    "interrupted",
)


def _reply_details(metadata: dict[str, Any] | None) -> dict[str, Any]:
    """What a stored reply's metadata holds of :data:`REPLY_DETAIL_KEYS`; replies stored before
    a key existed simply lack it (the page shows what there is)."""
    metadata = metadata if isinstance(metadata, dict) else {}
    return {key: metadata[key] for key in REPLY_DETAIL_KEYS if key in metadata}


def _pending_approvals(message: ChatMessage) -> list[dict[str, Any]]:
    """The calls of a paused tool-call message, as the ``approval_required`` event lists them.

    Taken from the message's pending, unexpired :class:`ToolApproval` rows (allowed decisions,
    reason, expiry); ``[]`` when none waits any more (expired, decided): no card is offered
    for calls that can no longer be decided."""
    now = timezone.now()
    return [
        row.to_pending()
        for row in message.tool_approvals.filter(
            status=ToolApproval.Status.PENDING, expires_at__gt=now
        ).order_by("pk")
    ]


def _own_votes(conversation: Any) -> dict[int, dict[str, dict[str, Any]]]:
    """The owner's votes on the conversation's replies: message id → key → ``{"value",
    "reason", "comment"}`` (one query)."""
    votes: dict[int, dict[str, dict[str, Any]]] = {}
    rows = Score.objects.filter(
        message__conversation=conversation,
        source=Score.Source.USER,
        author_id=conversation.owner_id,
    )
    for score in rows:
        assert score.message_id is not None
        votes.setdefault(score.message_id, {})[score.key] = {
            "value": score.value,
            "reason": score.reason,
            "comment": score.comment,
        }
    return votes


def _transcript(conversation: Any) -> list[dict[str, Any]]:
    """The user and assistant messages to show (tool rounds and system text are not).

    Each is ``{"id", "role", "text", "interrupted", "pending", "trace_id", "details"}``
    (``interrupted``: a reply cut short, or a user's message whose turn never ended — the server
    stopped; ``pending``: its turn is running; :mod:`advisors_app.memory.pending`). An assistant
    reply's ``details`` (:func:`_reply_details`; ``{}`` for user messages) are the metadata its
    turn stored — trace id, chain version, sources, tool calls, usage, finish reason and timings
    in milliseconds — which the page renders with the same code as a live reply's ``done``
    frame, so a reopened conversation looks as it did live. ``trace_id`` is ``None`` for replies
    stored before replies were tagged. When the conversation's last message is a tool-call
    message waiting for approval (``metadata["approval_pending"]``), it is shown even without
    text, its ``details`` holding ``pending_approvals`` (:func:`_pending_approvals`), so the
    page shows its approval card again. A reply the owner rated has their votes under
    ``feedback`` (:func:`_own_votes`), so the page shows the 👍/👎 pressed.
    """
    rows = list(
        ChatMessage.objects.filter(
            conversation=conversation,
            message_type__in=(
                MessageType.USER.value,
                MessageType.ASSISTANT.value,
                MessageType.TOOL.value,
            ),
        ).order_by("sequence")
    )
    last = rows[-1] if rows else None
    votes = _own_votes(conversation)
    transcript = []
    for row in rows:
        if row.message_type == MessageType.TOOL.value:
            continue
        pending = (
            row is last
            and row.message_type == MessageType.ASSISTANT.value
            and bool(row.tool_calls)
            and isinstance(row.metadata, dict)
            and row.metadata.get(APPROVAL_PENDING) is True
        )
        approvals = _pending_approvals(row) if pending else []
        if not row.text.strip() and not approvals:
            continue
        details = (
            _reply_details(row.metadata) if row.message_type == MessageType.ASSISTANT.value else {}
        )
        if approvals:
            details["pending_approvals"] = approvals
        if row.pk in votes:
            details["feedback"] = votes[row.pk]
        # A user's message stored before its turn ran: its turn is running, or never ended.
        state = message_state(row.metadata, row.created_at)
        transcript.append(
            {
                "id": row.pk,
                "role": row.message_type,
                "text": row.text,
                "interrupted": state == INTERRUPTED_STATE,
                "pending": state == PENDING_STATE,
                "trace_id": details.get(TRACE_ID),
                "details": details,
            }
        )
    return transcript


def _offered_chains(user: Any) -> QuerySet[AdvisorChain]:
    """The picker's chains, by slug: the enabled ones ``production`` serves, since the page runs
    nothing else; staff who may view chains (as the admin asks) also see the unpublished ones
    they are building, as the REST chain list shows them."""
    chains = AdvisorChain.objects.filter(enabled=True).order_by("slug")
    if not sees_chain_configuration(user):
        chains = chains.filter(labels__name=PRODUCTION)
    return chains


@require_GET
@login_required
def chat(request: HttpRequest, conversation_id: str | None = None) -> HttpResponse:
    """The chat page; with ``conversation_id``, that conversation of the user's is open."""
    chains = list(_offered_chains(request.user).values("slug", "name", "description"))
    slugs = [c["slug"] for c in chains]
    current = None
    messages: list[dict[str, Any]] = []
    chain = request.GET.get("chain")
    if conversation_id is not None:
        current = find_conversation(request.user, conversation_id)
        if current is None:
            raise Http404("No such conversation.")
        messages = _transcript(current)
        if chain not in slugs:
            # The chain the conversation was last continued with.
            chain = (
                CallLog.objects.filter(conversation_id=current.conversation_id)
                .order_by("-created")
                .values_list("chain_slug", flat=True)
                .first()
            )
    if chain not in slugs:
        preferred = app_settings.CHAT_PAGE_DEFAULT_CHAIN
        chain = preferred if preferred in slugs else (slugs[0] if slugs else None)
    conversations = [
        {"id": public_conversation_id(c.conversation_id), "title": c.title}
        for c in listed_conversations(request.user).only("conversation_id", "title")[
            :CONVERSATION_LIST_SIZE
        ]
    ]
    staff = request.user.is_staff and request.user.has_perm("advisors_app.view_calllog")
    context = {
        "chains": chains,
        "chain": chain,
        "conversations": conversations,
        "current_id": conversation_id,
        "messages": messages,
        # Embedded with json_script and drawn by chat.js as a live reply's done frame is.
        "replies": {str(m["id"]): m["details"] for m in messages if m["role"] == "assistant"},
        "max_chars": app_settings.MAX_MESSAGE_CHARS,
        "logout_url": _reverse_or_none("logout"),
        "config": {
            "chain": chain,
            "conversationId": conversation_id,
            "chatUrl": reverse("advisors_app:chat"),
            "wsPath": "/ws/chat/",
            "loginUrl": resolve_url(settings.LOGIN_URL),
            "traceUrl": reverse("advisors_app:chat-trace", args=["TRACE_ID"]) if staff else None,
            # Offered after a 👎 (the codes the feedback frame's reason takes).
            "feedbackReasons": [[code, label] for code, label in REASONS.items()],
        },
    }
    return render(request, "advisors_app/chat.html", context)


@require_GET
@login_required
def trace(request: HttpRequest, trace_id: str) -> JsonResponse:
    """One turn's call log as JSON: status, timings (seconds), usage and per-advisor rows.

    403 unless the user is staff with the ``advisors_app.view_calllog`` permission (what the
    admin's call-log pages need too); 404 for an unknown trace id.
    """
    if not (request.user.is_staff and request.user.has_perm("advisors_app.view_calllog")):
        return JsonResponse({"detail": "Only staff who may view call logs see traces."}, status=403)
    log = CallLog.objects.filter(trace_id=trace_id).first()
    if log is None:
        return JsonResponse({"detail": "No call log has this trace id."}, status=404)
    return JsonResponse(
        {
            "trace_id": log.trace_id,
            "chain": log.chain_slug,
            "mode": log.mode,
            "status": log.status,
            "latency": log.latency,
            "time_to_first_token": log.time_to_first_token,
            "usage": log.usage,
            "finish_reason": log.finish_reason,
            "finish_category": log.finish_category,
            "error": f"{log.error_type}: {log.error_message}" if log.error_type else "",
            "rows": trace_rows(log.trace),
            "admin_url": _reverse_or_none("admin:advisors_app_calllog_change", log.pk),
        }
    )
