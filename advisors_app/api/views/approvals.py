"""Tool-call approvals over REST: list and show them, decide one outside its turn, and the
"allow for this conversation" grants of a conversation (issue 19).

A caller lists their own approvals (the turns that paused were theirs). One approval is visible
to its owner and to whoever may decide other users' approvals (:data:`DECIDE_PERMISSION`, or the
permission the chain names for its approvers); anyone else gets 404, as for an id never used.
A decision is recorded on the row (:func:`advisors_app.approvals.pauses.record_decision`); once
every call of the paused reply has one, the resume is queued for a task worker
(:mod:`advisors_app.approvals.jobs`), which runs the turn for the owner and pushes its events to
the owner's open chat sockets. Grants are listed and revoked on the caller's own conversations.
"""

from __future__ import annotations

from typing import Any

from django.db.models import Q, QuerySet
from django.http import Http404
from django.utils import timezone
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    extend_schema_view,
)
from rest_framework import generics
from rest_framework.exceptions import PermissionDenied, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from advisors_app.api.base import ApiView
from advisors_app.api.errors import Conflict, ErrorSerializer
from advisors_app.api.pagination import ApiPagination
from advisors_app.api.serializers.approvals import (
    ApprovalDecisionRequestSerializer,
    ApprovalQueuedSerializer,
    ApprovalSerializer,
    ToolGrantSerializer,
)
from advisors_app.approvals.jobs import enqueue_resume
from advisors_app.approvals.pauses import record_decision
from advisors_app.core.tools.approval import ToolCallDecision, ToolCallDecisionError
from advisors_app.memory.conversations import find_conversation
from advisors_app.models import Conversation, ToolApproval, ToolApprovalGrant
from advisors_app.models.approvals import DECIDE_PERMISSION

__all__ = [
    "STATUS_FILTERS",
    "ApprovalDecisionView",
    "ApprovalDetailView",
    "ApprovalListView",
    "ConversationGrantDetailView",
    "ConversationGrantListView",
]

Status = ToolApproval.Status
#: The values of ``?status=`` (default ``pending``).
STATUS_FILTERS = ("pending", "approved", "edited", "rejected", "expired", "all")
_DECISION_FIELDS = ("decision", "arguments", "reason")

_AUTH = {401: OpenApiResponse(ErrorSerializer, description="Not authenticated.")}
_NOT_FOUND = {
    **_AUTH,
    404: OpenApiResponse(ErrorSerializer, description="No approval you may see has this id."),
}
_NO_CONVERSATION = {
    **_AUTH,
    404: OpenApiResponse(ErrorSerializer, description="No conversation of yours has this id."),
}


def _filtered(rows: QuerySet[ToolApproval], status: str) -> QuerySet[ToolApproval]:
    """``rows`` whose status, as reported (a pending call past its expiry is expired), is
    ``status``."""
    now = timezone.now()
    if status == "all":
        return rows
    if status == Status.PENDING:
        return rows.filter(status=Status.PENDING, expires_at__gt=now)
    if status == Status.EXPIRED:
        return rows.filter(Q(status=Status.EXPIRED) | Q(status=Status.PENDING, expires_at__lte=now))
    return rows.filter(status=status)


def _visible(user: Any, pk: int) -> ToolApproval:
    """Approval ``pk`` if ``user`` owns it or may decide others' (else ``Http404``)."""
    row = ToolApproval.objects.select_related("conversation", "decided_by").filter(pk=pk).first()
    if row is None or not (
        row.user_id == user.pk
        or user.has_perm(DECIDE_PERMISSION)
        or (row.approver_permission and user.has_perm(row.approver_permission))
    ):
        raise Http404("No approval you may see has this id.")
    return row


@extend_schema_view(
    get=extend_schema(
        tags=["approvals"],
        summary="Your tool calls that wait (or waited) for approval, newest first",
        parameters=[
            OpenApiParameter(
                "status",
                str,
                enum=list(STATUS_FILTERS),
                description="Only approvals in this status (default pending; all: every one).",
            )
        ],
        responses={
            200: ApprovalSerializer(many=True),
            400: OpenApiResponse(ErrorSerializer, description="Unknown status."),
            **_AUTH,
        },
    )
)
class ApprovalListView(ApiView, generics.ListAPIView):
    """``GET /api/approvals/?status=``: the caller's own approvals (paginated)."""

    serializer_class = ApprovalSerializer
    pagination_class = ApiPagination

    def get_queryset(self) -> QuerySet[ToolApproval]:
        status = self.request.query_params.get("status", Status.PENDING.value)
        if status not in STATUS_FILTERS:
            raise ValidationError(
                {"status": [f"Unknown status {status!r}; use one of {', '.join(STATUS_FILTERS)}."]}
            )
        rows = ToolApproval.objects.filter(user_id=self.request.user.pk).select_related(
            "conversation", "decided_by"
        )
        return _filtered(rows, status).order_by("-created_at", "-pk")


@extend_schema_view(
    get=extend_schema(
        tags=["approvals"],
        summary="One approval: yours, or any if you may decide others'",
        responses={200: ApprovalSerializer, **_NOT_FOUND},
    )
)
class ApprovalDetailView(ApiView):
    """``GET /api/approvals/<id>/``."""

    serializer_class = ApprovalSerializer

    def get(self, request: Request, pk: int) -> Response:
        return Response(ApprovalSerializer(_visible(request.user, pk)).data)


@extend_schema_view(
    post=extend_schema(
        tags=["approvals"],
        summary="Decide a tool call outside its turn (approvers, or you from another device)",
        request=ApprovalDecisionRequestSerializer,
        responses={
            200: OpenApiResponse(
                ApprovalSerializer, description="Recorded; other calls of the reply still wait."
            ),
            202: OpenApiResponse(
                ApprovalQueuedSerializer,
                description="Every call of the reply is decided: its resume is queued.",
            ),
            400: OpenApiResponse(
                ErrorSerializer,
                description="Invalid decision, one the call does not allow, or expired.",
            ),
            403: OpenApiResponse(ErrorSerializer, description="You may not decide this call."),
            409: OpenApiResponse(ErrorSerializer, description="Decided or resumed already."),
            **_NOT_FOUND,
        },
    )
)
class ApprovalDecisionView(ApiView):
    """``POST /api/approvals/<id>/decision/`` ``{"decision", "arguments"?, "reason"?}``."""

    serializer_class = ApprovalDecisionRequestSerializer

    def post(self, request: Request, pk: int) -> Response:
        row = _visible(request.user, pk)
        if not row.may_decide(request.user):
            needed = row.approver_permission or f"ownership or {DECIDE_PERMISSION}"
            raise PermissionDenied(f"You may not decide this tool call (it needs {needed}).")
        decision = self._decision(request, row)
        self._check_state(row)
        try:
            complete = record_decision(row, request.user, decision)
        except PermissionError as exc:  # the permission changed since the check above
            raise PermissionDenied(str(exc)) from exc
        except ValueError as exc:
            row.refresh_from_db()
            if row.status == Status.EXPIRED:
                raise ValidationError({"decision": [str(exc)]}) from exc
            raise Conflict(str(exc)) from exc
        row = _visible(request.user, pk)
        if not complete:
            return Response(ApprovalSerializer(row).data)
        task_id = enqueue_resume(row.message_id)
        body = {"status": "queued", "task_id": task_id, "approval": ApprovalSerializer(row).data}
        return Response(body, status=202)

    def _decision(self, request: Request, row: ToolApproval) -> ToolCallDecision:
        data = request.data
        if not isinstance(data, dict):
            raise ValidationError({"non_field_errors": ["Send a JSON object."]})
        unknown = sorted(str(key) for key in data if key not in _DECISION_FIELDS)
        if unknown:
            known = ", ".join(_DECISION_FIELDS)
            raise ValidationError(
                {key: [f"Unknown field. Known fields: {known}."] for key in unknown}
            )
        serializer = ApprovalDecisionRequestSerializer(data=data)
        serializer.is_valid(raise_exception=True)
        values = serializer.validated_data
        if not isinstance(values.get("arguments", {}), dict):
            raise ValidationError({"arguments": ["Send the arguments as a JSON object."]})
        try:
            decision = ToolCallDecision(
                row.approval_id, values["decision"], values.get("arguments"), values.get("reason")
            )
        except ToolCallDecisionError as exc:
            raise ValidationError({"arguments": [str(exc)]}) from exc
        if decision.decision.value not in row.allowed_decisions:
            allowed = ", ".join(row.allowed_decisions)
            raise ValidationError(
                {"decision": [f"{decision.decision.value!r} is not allowed here; use {allowed}."]}
            )
        return decision

    def _check_state(self, row: ToolApproval) -> None:
        """Refuse a call that can no longer be decided, saying why (400 expired, 409 decided).
        A pending call past its expiry is left to ``record_decision``, which marks it."""
        if row.status == Status.EXPIRED:
            raise ValidationError(
                {"decision": [f"This approval expired at {row.expires_at:%Y-%m-%d %H:%M} UTC."]}
            )
        if row.status != Status.PENDING:
            raise Conflict(f"This call was {row.get_status_display().lower()} already.")
        if row.decided_at is not None and not row.expired:
            who = row.decided_by.get_username() if row.decided_by else "someone"
            raise Conflict(
                f"This call was decided already ({row.decision}, by {who}); "
                "its turn resumes once every call of the reply is decided."
            )


def _own_conversation(request: Request, conversation_id: str) -> Conversation:
    conversation = find_conversation(request.user, conversation_id)
    if conversation is None:
        raise Http404("No conversation of yours has this id.")
    return conversation


@extend_schema_view(
    get=extend_schema(
        tags=["conversations"],
        summary='The tools allowed without approval in a conversation ("allow for this '
        'conversation")',
        responses={200: ToolGrantSerializer(many=True), **_NO_CONVERSATION},
    )
)
class ConversationGrantListView(ApiView, generics.ListAPIView):
    """``GET /api/conversations/<id>/grants/``: active grants of the caller's conversation."""

    serializer_class = ToolGrantSerializer
    pagination_class = ApiPagination

    def get_queryset(self) -> QuerySet[ToolApprovalGrant]:
        conversation = _own_conversation(self.request, self.kwargs["conversation_id"])
        return (
            ToolApprovalGrant.objects.filter(conversation=conversation, revoked_at__isnull=True)
            .select_related("granted_by")
            .order_by("tool")
        )


@extend_schema_view(
    delete=extend_schema(
        tags=["conversations"],
        summary="Revoke a grant: the tool needs approval again in this conversation",
        responses={
            204: None,
            **_AUTH,
            404: OpenApiResponse(
                ErrorSerializer, description="No such conversation of yours, or no active grant."
            ),
        },
    )
)
class ConversationGrantDetailView(ApiView):
    """``DELETE /api/conversations/<id>/grants/<tool>/``."""

    def delete(self, request: Request, conversation_id: str, tool: str) -> Response:
        conversation = _own_conversation(request, conversation_id)
        revoked = ToolApprovalGrant.objects.filter(
            conversation=conversation, tool=tool, revoked_at__isnull=True
        ).update(revoked_at=timezone.now(), revoked_by=request.user)
        if not revoked:
            raise Http404(f"No active grant of {tool!r} in this conversation.")
        return Response(status=204)
