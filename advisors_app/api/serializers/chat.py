"""What ``POST /api/chains/<slug>/call/`` and ``.../stream/`` take and answer
(:mod:`advisors_app.api.views.chat`).

Documentation only: the turn service validates a chat request (the same messages for REST,
websocket and admin), so these serializers describe the JSON for the OpenAPI schema.
"""

from __future__ import annotations

from drf_spectacular.utils import OpenApiExample, extend_schema_field, extend_schema_serializer
from rest_framework import serializers

from advisors_app.core.finish_reasons import FinishReasonCategory

__all__ = [
    "ChatRequestSerializer",
    "ChatResultSerializer",
    "DecisionSerializer",
    "PendingApprovalSerializer",
    "SourceSerializer",
    "TimingsSerializer",
    "ToolRunSerializer",
    "UsageSerializer",
    "VersionField",
]


class DecisionSerializer(serializers.Serializer):
    """A decision on one tool call that waits for approval."""

    approval_id = serializers.CharField(help_text="The pending call's approval_id.")
    decision = serializers.ChoiceField(["approve", "edit", "reject"])
    arguments = serializers.JSONField(
        required=False, help_text="edit: the arguments to run the call with (a JSON object)."
    )
    reason = serializers.CharField(
        required=False, help_text="reject: what the model is told instead of the tool's result."
    )
    grant = serializers.BooleanField(
        required=False,
        help_text="approve/edit: also allow this tool for the rest of the conversation.",
    )

    class Meta:
        ref_name = "ToolCallDecision"


class PendingApprovalSerializer(serializers.Serializer):
    approval_id = serializers.CharField(help_text="Name it in a decision.")
    tool = serializers.CharField()
    arguments = serializers.JSONField(help_text="What the model asked to run the tool with.")
    allowed_decisions = serializers.ListField(child=serializers.CharField())
    reason = serializers.CharField(help_text="Why the call needs approval.")
    expires_at = serializers.DateTimeField()

    class Meta:
        ref_name = "PendingApproval"


@extend_schema_field(
    {"oneOf": [{"type": "integer", "minimum": 1}, {"type": "string", "enum": ["draft"]}]}
)
class VersionField(serializers.JSONField):
    """A version number or ``"draft"`` (validated by the turn service)."""


@extend_schema_serializer(
    # Swagger UI sends the first example as the default body: a turn that runs as it is.
    examples=[
        OpenApiExample("A message", value={"message": "How do refunds work?"}, request_only=True),
        OpenApiExample(
            "Continue a conversation with params",
            value={
                "message": "And for bank transfers?",
                "conversation_id": "support-42",
                "params": {"options": {"temperature": 0.2}},
            },
            request_only=True,
        ),
        OpenApiExample(
            "Resume a turn paused for approval",
            value={
                "conversation_id": "support-42",
                "decisions": [{"approval_id": "ap_1", "decision": "approve"}],
            },
            request_only=True,
        ),
    ]
)
class ChatRequestSerializer(serializers.Serializer):
    """A chat turn (documentation; the turn service validates): a ``message``, or the
    ``decisions`` that resume a turn paused for tool-call approval, not both."""

    message = serializers.CharField(
        required=False,
        help_text="The user's message (at most MAX_MESSAGE_CHARS). Required unless "
        "decisions are sent.",
    )
    decisions = DecisionSerializer(
        many=True,
        required=False,
        help_text="Resume the conversation's paused turn: one decision per pending call "
        "(with conversation_id, without message).",
    )
    conversation_id = serializers.CharField(
        required=False,
        allow_null=True,
        max_length=128,
        help_text="Continue this conversation of yours; omit to start one (the answer says "
        "its id). A new id you choose (letters, digits, ._:-) starts a conversation with it.",
    )
    params = serializers.DictField(
        required=False,
        help_text="A JSON object: per-request params the chain accepts (its params_schema): "
        '"options" (temperature, max_tokens, ...), "system_params", and advisor params such '
        'as "qa_filter_expression".',
    )
    label = serializers.CharField(
        required=False,
        help_text="Run the version this label points at (default: production). Staff only "
        "for any other label.",
    )
    version = VersionField(
        required=False,
        help_text='Run this version number, or "draft" for the editable rows. Staff only.',
    )

    class Meta:
        ref_name = "Chat"


class UsageSerializer(serializers.Serializer):
    prompt_tokens = serializers.IntegerField()
    completion_tokens = serializers.IntegerField()
    total_tokens = serializers.IntegerField()
    cached_prompt_tokens = serializers.IntegerField(
        required=False, help_text="Prompt tokens the provider served from its cache, if told."
    )

    class Meta:
        ref_name = "Usage"


class SourceSerializer(serializers.Serializer):
    document_id = serializers.CharField(allow_null=True, help_text="The best-scoring chunk.")
    title = serializers.CharField()
    source = serializers.CharField()
    score = serializers.FloatField(allow_null=True, help_text="Cosine similarity.")
    snippet = serializers.CharField(allow_blank=True, help_text="The start of that chunk.")
    retrieval = serializers.DictField(
        allow_null=True,
        required=False,
        help_text="How the search found that chunk: mode, vector_rank, lexical_rank, "
        "fused_score, rerank_score (as far as they apply); null from a store that records none.",
    )

    class Meta:
        ref_name = "ChatSource"


class ToolRunSerializer(serializers.Serializer):
    id = serializers.CharField(allow_blank=True)
    name = serializers.CharField()
    arguments = serializers.CharField(help_text="The JSON text the model sent.")
    ok = serializers.BooleanField(allow_null=True)
    error = serializers.CharField(
        allow_null=True, help_text="What the model received instead of a result."
    )
    duration_ms = serializers.FloatField(allow_null=True)

    class Meta:
        ref_name = "ChatToolRun"


class TimingsSerializer(serializers.Serializer):
    latency_ms = serializers.FloatField()
    time_to_first_token_ms = serializers.FloatField(allow_null=True, help_text="Streams only.")

    class Meta:
        ref_name = "ChatTimings"


class GuardVerdictSerializer(serializers.Serializer):
    rail = serializers.CharField(
        help_text="input, documents, tool_arguments, tool_results or output."
    )
    check = serializers.CharField(help_text="The check's name (its kind unless named).")
    action = serializers.CharField(help_text="block, redact, drop, reask, hold or log.")
    detail = serializers.JSONField(help_text="What it found: words, a probability, an error.")
    failed = serializers.BooleanField(help_text="The check errored or timed out.")
    ms = serializers.FloatField(help_text="How long the check took.")

    class Meta:
        ref_name = "ChatGuardVerdict"


class ChatResultSerializer(serializers.Serializer):
    """The answer of ``POST /api/chains/<slug>/call/`` (``TurnOutcome.to_dict()``)."""

    conversation_id = serializers.CharField(
        allow_null=True,
        help_text="Pass it to continue the conversation. null: the turn started a conversation "
        "and stored nothing (a guard refused the message), so there is none.",
    )
    message_id = serializers.IntegerField(
        allow_null=True, help_text="The stored reply's id (null when nothing was stored)."
    )
    stored = serializers.BooleanField(
        help_text="Whether the turn's messages were stored (false for a guard's refusal)."
    )
    content = serializers.CharField(allow_blank=True)
    usage = UsageSerializer(allow_null=True, help_text="Tokens, when the model reports them.")
    metadata = serializers.JSONField(
        help_text="Response metadata: retrieved documents (qa_retrieved_documents), "
        "citations, semantic_cache_hit, model, ..."
    )
    finish_reason = serializers.CharField(
        allow_null=True, help_text="The raw finish reason (STOP, LENGTH, TOOL_CALLS, ...)."
    )
    finish_category = serializers.ChoiceField(
        choices=[c.value for c in FinishReasonCategory],
        allow_null=True,
        help_text="The provider-neutral category of finish_reason (a guard's refusal: "
        "guardrail; docs/events.md).",
    )
    trace_id = serializers.CharField(help_text="Finds the call log row of this turn.")
    version = serializers.IntegerField(
        allow_null=True, help_text="The chain version that answered (null: the draft)."
    )
    sources = SourceSerializer(many=True, help_text="The documents retrieval cited.")
    tools = ToolRunSerializer(many=True, help_text="The tool calls the turn ran, in order.")
    timings = TimingsSerializer()
    pending_approvals = PendingApprovalSerializer(
        many=True,
        help_text="Tool calls waiting for a decision (finish_reason APPROVAL_REQUIRED); "
        "resume with decisions.",
    )
    guard = GuardVerdictSerializer(
        many=True, help_text="The guard verdicts of the turn, in order (docs/guards.md)."
    )

    class Meta:
        ref_name = "ChatResult"
