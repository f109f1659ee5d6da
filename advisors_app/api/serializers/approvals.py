"""Tool calls waiting for approval, decisions on them, and the tools a conversation allows
(:mod:`advisors_app.api.views.approvals`)."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from advisors_app.api.serializers.chat import DecisionSerializer, PendingApprovalSerializer
from advisors_app.memory.conversations import public_conversation_id
from advisors_app.models import ToolApproval, ToolApprovalGrant

__all__ = [
    "ApprovalDecisionRequestSerializer",
    "ApprovalQueuedSerializer",
    "ApprovalSerializer",
    "ToolGrantSerializer",
]


class ApprovalSerializer(PendingApprovalSerializer, serializers.ModelSerializer):
    """A tool call that waited, or waits, for a decision (a ``ToolApproval`` row)."""

    reason = serializers.CharField(
        source="reason_text", help_text="Why the call needs approval (the policy's text)."
    )
    status = serializers.SerializerMethodField(
        help_text="pending, approved, edited, rejected or expired (a pending call past "
        "expires_at is reported expired)."
    )
    decision = serializers.CharField(
        allow_null=True, help_text="approve, edit or reject once decided; else null."
    )
    decided_arguments = serializers.JSONField(
        allow_null=True, help_text="edit: the arguments the call runs with."
    )
    decision_reason = serializers.CharField(help_text="reject: what the model is told.")
    decided_by = serializers.SlugRelatedField(
        slug_field="username", read_only=True, allow_null=True
    )
    chain = serializers.CharField(source="chain_slug")
    conversation_id = serializers.SerializerMethodField(
        help_text="The conversation's id as its owner uses it."
    )

    class Meta:
        model = ToolApproval
        fields = [
            "id",
            "approval_id",
            "tool",
            "arguments",
            "allowed_decisions",
            "reason",
            "status",
            "decision",
            "decided_arguments",
            "decision_reason",
            "decided_by",
            "decided_at",
            "expires_at",
            "created_at",
            "chain",
            "conversation_id",
        ]
        read_only_fields = fields
        ref_name = "Approval"

    def get_status(self, row: ToolApproval) -> str:
        return ToolApproval.Status.EXPIRED.value if row.expired else str(row.status)

    def get_conversation_id(self, row: ToolApproval) -> str:
        return public_conversation_id(row.conversation.conversation_id)

    def to_representation(self, instance: ToolApproval) -> dict[str, Any]:
        data: dict[str, Any] = super().to_representation(instance)
        data["decision"] = data["decision"] or None
        return data


class ApprovalDecisionRequestSerializer(DecisionSerializer):
    """A decision on one call outside its turn (the call is named by the URL)."""

    approval_id = None  # type: ignore[assignment]
    grant = None  # type: ignore[assignment]

    class Meta:
        ref_name = "ApprovalDecision"


class ApprovalQueuedSerializer(serializers.Serializer):
    """Every call of the paused reply is decided: its resume is queued for a task worker."""

    status = serializers.ChoiceField(["queued"])
    task_id = serializers.CharField(help_text="The resume task's id.")
    approval = ApprovalSerializer(help_text="The call as decided.")

    class Meta:
        ref_name = "ApprovalQueued"


class ToolGrantSerializer(serializers.ModelSerializer):
    """ "Allow for this conversation": ``tool`` runs without approval until revoked."""

    granted_by = serializers.SlugRelatedField(
        slug_field="username", read_only=True, allow_null=True
    )

    class Meta:
        model = ToolApprovalGrant
        fields = ["tool", "granted_by", "created_at"]
        read_only_fields = fields
        ref_name = "ToolGrant"
