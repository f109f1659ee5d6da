"""Human approval of tool calls, stored: pending calls and "allow for this conversation" grants.

A turn whose model reply holds calls that need approval (``advisors_app.core.tools.approval``)
ends with finish reason ``APPROVAL_REQUIRED``; the turn service stores the assistant tool-call
message (marked pending) and one :class:`ToolApproval` per waiting call, in the turn's
transaction. A decision — resuming the conversation with ``decisions`` on any transport, or an
approver's action in the admin or the API — is checked against the row (owner or approver
permission, expiry, the arguments hash) and recorded on it. Rows are never deleted by the
flow: they are the record of who allowed what.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

__all__ = ["DECIDE_PERMISSION", "ToolApproval", "ToolApprovalGrant", "arguments_hash"]

#: Holders may decide other users' approvals (``<app_label>.<codename>``).
DECIDE_PERMISSION = "advisors_app.decide_toolapproval"


def arguments_hash(arguments: Any) -> str:
    """SHA-256 of the canonical JSON of a call's arguments (a dict, or the model's raw text)."""
    if isinstance(arguments, str):
        canonical = arguments
    else:
        canonical = json.dumps(arguments, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


class ToolApproval(models.Model):
    """One tool call that waited, or waits, for a person's decision.

    ``approval_id`` is the model's tool call id (what decisions name); ``message`` the stored
    assistant message that requested the call; ``arguments`` what the model asked for and
    ``decided_arguments`` what ran after an edit. ``approver_permission`` empty: the
    conversation's owner or a holder of :data:`DECIDE_PERMISSION` may decide; else only
    holders of that permission.
    """

    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        APPROVED = "approved", "Approved"
        EDITED = "edited", "Edited and approved"
        REJECTED = "rejected", "Rejected"
        EXPIRED = "expired", "Expired"

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        related_name="advisor_tool_approvals",
        help_text="Whose turn asked for the call.",
    )
    chain_slug = models.SlugField(max_length=100)
    conversation = models.ForeignKey(
        "advisors_app.Conversation", on_delete=models.CASCADE, related_name="tool_approvals"
    )
    message = models.ForeignKey(
        "advisors_app.ChatMessage",
        on_delete=models.CASCADE,
        related_name="tool_approvals",
        help_text="The assistant message whose tool call this is.",
    )
    call_log = models.ForeignKey(
        "advisors_app.CallLog",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="tool_approvals",
        help_text="The turn that paused.",
    )
    resumed_call_log = models.ForeignKey(
        "advisors_app.CallLog",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="resumed_tool_approvals",
        help_text="The turn that ran the decision.",
    )
    approval_id = models.CharField(max_length=255, help_text="The model's tool call id.")
    tool = models.CharField(max_length=255)
    arguments = models.JSONField(help_text="What the model asked for.")
    arguments_hash = models.CharField(max_length=64, editable=False)
    reason_text = models.TextField(blank=True, help_text="Why the policy asks for approval.")
    allowed_decisions = models.JSONField(default=list)
    approver_permission = models.CharField(
        max_length=200,
        blank=True,
        help_text="Only its holders may decide (empty: owner or approver).",
    )
    status = models.CharField(
        max_length=10, choices=Status.choices, default=Status.PENDING, db_index=True
    )
    decision = models.CharField(
        max_length=10,
        blank=True,
        choices=[("approve", "Approve"), ("edit", "Edit"), ("reject", "Reject")],
        help_text="What was decided (recorded before the resumed turn runs it).",
    )
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    decided_at = models.DateTimeField(null=True, blank=True)
    decision_reason = models.TextField(blank=True, help_text="A rejection's message, if any.")
    decided_arguments = models.JSONField(null=True, blank=True)
    expires_at = models.DateTimeField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ("-created_at", "-pk")
        permissions = [("decide_toolapproval", "Can decide other users' tool approvals")]
        constraints = [
            models.UniqueConstraint(
                fields=("conversation", "approval_id"),
                condition=Q(status="pending"),
                name="advisors_one_pending_approval_per_call",
            )
        ]
        indexes = [models.Index(fields=("user", "status"), name="advisors_approval_user_status")]

    def __str__(self) -> str:
        return f"{self.tool} ({self.approval_id}) — {self.get_status_display()}"

    @property
    def expired(self) -> bool:
        return self.status == self.Status.PENDING and self.expires_at <= timezone.now()

    def may_decide(self, user: Any) -> bool:
        """Whether ``user`` may decide this call (see the class docstring)."""
        if not getattr(user, "is_authenticated", False) or not user.is_active:
            return False
        if self.approver_permission:
            return bool(user.has_perm(self.approver_permission))
        return user.pk == self.user_id or bool(user.has_perm(DECIDE_PERMISSION))

    def to_pending(self) -> dict[str, Any]:
        """The pending call as turns report it (``approval_id``, ``tool``, ``arguments``,
        ``allowed_decisions``, ``reason``, ``expires_at``)."""
        return {
            "approval_id": self.approval_id,
            "tool": self.tool,
            "arguments": self.arguments,
            "allowed_decisions": list(self.allowed_decisions),
            "reason": self.reason_text,
            "expires_at": self.expires_at.isoformat(),
        }


class ToolApprovalGrant(models.Model):
    """ "Allow for this conversation": ``tool`` needs no approval in ``conversation`` until
    revoked."""

    conversation = models.ForeignKey(
        "advisors_app.Conversation", on_delete=models.CASCADE, related_name="tool_grants"
    )
    tool = models.CharField(max_length=255)
    granted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    revoked_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )

    class Meta:
        ordering = ("-created_at", "-pk")
        constraints = [
            models.UniqueConstraint(
                fields=("conversation", "tool"),
                condition=Q(revoked_at__isnull=True),
                name="advisors_one_active_grant_per_tool",
            )
        ]

    def __str__(self) -> str:
        state = "revoked" if self.revoked_at else "active"
        return f"{self.tool} allowed in {self.conversation_id} ({state})"
