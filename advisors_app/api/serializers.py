"""Serializers of the API: request validation for CRUD, and the documented response shapes.

Chat requests are not validated here: the turn service validates them (the same messages for
REST, websocket and admin), so :class:`ChatRequestSerializer` and the chat responses only
describe the JSON for the OpenAPI schema. Chain writes validate through the registry
(:func:`advisors_app.definition.registry.params_errors`), the model's own ``clean()`` and the
definition
pipeline (:func:`advisors_app.definition.check_draft`: lint and compile), so the API, the admin
and the runtime agree. Versions and labels are read-only here: every write goes through
:mod:`advisors_app.definition` in the views.
"""

from __future__ import annotations

import copy
from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import IntegrityError, transaction
from django.db.models import Max, Prefetch, QuerySet
from django.urls import reverse
from drf_spectacular.utils import OpenApiExample, extend_schema_field, extend_schema_serializer
from rest_framework import serializers

from advisors_app.api.permissions import sees_chain_configuration
from advisors_app.core.advisor import HIGHEST_PRECEDENCE, LOWEST_PRECEDENCE
from advisors_app.core.vectorstore import Filter, FilterExpressionTextParser
from advisors_app.definition import check_draft, resolve_draft, snapshot_hash
from advisors_app.definition.registry import params_errors
from advisors_app.definition.runtime import (
    ChainConfigurationError,
    ChainNotFound,
    VersionNotFound,
    load_chain,
)
from advisors_app.memory.conversations import public_conversation_id
from advisors_app.models import (
    PRODUCTION,
    AdvisorChain,
    AdvisorConfig,
    ChainLabel,
    ChainVersion,
    ChatMessage,
    ChatModelConfig,
    Collection,
    Conversation,
    ConversationBoundary,
    Document,
    IngestionJob,
    PromptTemplate,
    ToolApproval,
    ToolApprovalGrant,
)
from advisors_app.stores.scoped import visible_collections
from advisors_app.validation import text_problem, validate_json_value

__all__ = [
    "OWN_VOTES",
    "AdvisorRowSerializer",
    "ApprovalDecisionRequestSerializer",
    "ApprovalQueuedSerializer",
    "ApprovalSerializer",
    "ChainConfigSerializer",
    "ChainDiffSerializer",
    "ChainLabelEventSerializer",
    "ChainLabelSerializer",
    "ChainSerializer",
    "ChainVersionDetailSerializer",
    "ChainVersionSerializer",
    "ChatRequestSerializer",
    "ChatResultSerializer",
    "CollectionSerializer",
    "ConversationBoundarySerializer",
    "ConversationDetailSerializer",
    "ConversationSerializer",
    "DocumentSerializer",
    "FileUploadSerializer",
    "IngestResultSerializer",
    "IngestionJobSerializer",
    "LabelMoveSerializer",
    "LabelRollbackSerializer",
    "PublishSerializer",
    "RestoreResultSerializer",
    "SearchRequestSerializer",
    "SearchResultSerializer",
    "TextUploadSerializer",
    "ToolGrantSerializer",
    "UsageSerializer",
    "with_version_state",
]

_OBJECT = {"type": "object", "additionalProperties": {}}


# -- chat ------------------------------------------------------------------------------------


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
class _VersionField(serializers.JSONField):
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
    version = _VersionField(
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
    finish_reason = serializers.CharField(allow_null=True)
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

    class Meta:
        ref_name = "ChatResult"


# -- approvals -------------------------------------------------------------------------------


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


# -- conversations ---------------------------------------------------------------------------


class TextField(serializers.CharField):
    """A ``CharField`` that takes text only: DRF's turns a number or a boolean into its text
    (``{"title": 42}`` stored "42"), where the rest of the API refuses the wrong type."""

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        return str(super().to_internal_value(data))


class ConversationSerializer(serializers.ModelSerializer):
    id = serializers.SerializerMethodField(help_text="The conversation id clients use.")
    title = TextField(max_length=200, allow_blank=True)

    class Meta:
        model = Conversation
        fields = ["id", "title", "created_at", "updated_at"]
        read_only_fields = ["created_at", "updated_at"]

    def get_id(self, conversation: Conversation) -> str:
        return public_conversation_id(conversation.conversation_id)


class OwnVoteSerializer(serializers.Serializer):
    """The caller's vote on a reply (``PUT /api/messages/<id>/feedback/``)."""

    value = serializers.JSONField(help_text="true/false (thumbs), a number or a label.")
    reason = serializers.CharField(allow_blank=True)
    comment = serializers.CharField(allow_blank=True)

    class Meta:
        ref_name = "OwnVote"


#: The attribute holding a message's votes by its reader (prefetched by the conversation view).
OWN_VOTES = "own_votes"


class MessageSerializer(serializers.ModelSerializer):
    """One stored message; ``id`` is what a turn's answer calls ``message_id``."""

    # ``feedback`` reads the caller's votes from the OWN_VOTES attribute the view prefetches.

    type = serializers.CharField(source="message_type")
    feedback = serializers.SerializerMethodField(
        help_text='Your votes on this reply by key, e.g. {"thumbs": {"value": false, '
        '"reason": "wrong", "comment": ""}}; {} when you have not rated it.'
    )

    class Meta:
        model = ChatMessage
        fields = ["id", "sequence", "type", "text", "metadata", "tool_calls", "tool_responses"]
        fields += ["created_at", "feedback"]
        ref_name = "ConversationMessage"

    @extend_schema_field(serializers.DictField(child=OwnVoteSerializer()))
    def get_feedback(self, message: ChatMessage) -> dict[str, dict[str, Any]]:
        return {
            score.key: {"value": score.value, "reason": score.reason, "comment": score.comment}
            for score in getattr(message, OWN_VOTES)
        }


@extend_schema_field(UsageSerializer(allow_null=True))
class _StoredUsageField(serializers.JSONField):
    """A stored ``Usage.to_dict()`` as it was written (``null``: no model was called)."""


class ConversationBoundarySerializer(serializers.ModelSerializer):
    """One boundary event of a conversation's session log (``ConversationBoundary``)."""

    kind = serializers.CharField(help_text='What the event is: "compaction".')
    covers_up_to = serializers.IntegerField(
        help_text="The sequence of the last message that left the model's view (the messages "
        "themselves stay in messages, unchanged)."
    )
    summary = serializers.CharField(
        allow_blank=True,
        help_text="What replaces the covered messages in the prompt (blank for a window).",
    )
    model = serializers.CharField(
        allow_blank=True, help_text="The chat model that wrote the summary (blank for a window)."
    )
    usage = _StoredUsageField(help_text="The summary call's token usage (null: no model call).")

    class Meta:
        model = ConversationBoundary
        fields = ["kind", "covers_up_to", "summary", "model", "usage", "created_at"]
        read_only_fields = fields
        ref_name = "ConversationBoundary"


class ConversationDetailSerializer(ConversationSerializer):
    messages = MessageSerializer(many=True, read_only=True)
    boundaries = ConversationBoundarySerializer(
        many=True,
        read_only=True,
        help_text="Compactions of the session log, oldest first (empty without session memory).",
    )

    class Meta(ConversationSerializer.Meta):
        fields = [*ConversationSerializer.Meta.fields, "messages", "boundaries"]


# -- chains ----------------------------------------------------------------------------------


def _params_schema(chain: AdvisorChain) -> dict[str, Any] | None:
    """The params schema of what ``production`` serves (``None``: disabled or unpublished)."""
    if not chain.enabled:
        return None
    try:
        return dict(load_chain(chain.slug).params_schema)
    except (ChainNotFound, VersionNotFound, ChainConfigurationError):
        return None


def with_version_state(chains: QuerySet[AdvisorChain]) -> QuerySet[AdvisorChain]:
    """``chains`` with what :class:`ChainSerializer`'s version fields read, in two queries
    for any number of chains (without it they query per chain)."""
    labels = ChainLabel.objects.select_related("version").order_by("name")
    return chains.annotate(latest_number=Max("versions__number")).prefetch_related(
        Prefetch("labels", queryset=labels, to_attr="label_rows")
    )


def _label_rows(chain: AdvisorChain) -> list[ChainLabel]:
    rows = getattr(chain, "label_rows", None)
    if rows is None:
        rows = list(chain.labels.select_related("version").order_by("name"))
    return rows


class _VersionState(serializers.Serializer):
    """Where a chain's versions stand: labels, newest version, and whether the draft moved on
    (for staff only)."""

    labels = serializers.SerializerMethodField(
        help_text='Each label and the version number it points at: {"production": 3}.'
    )
    latest_version = serializers.SerializerMethodField(
        help_text="The newest published version number (null: nothing published yet)."
    )
    draft_changed = serializers.SerializerMethodField(
        help_text="Whether the editable draft differs from what production serves (true "
        "when nothing is published)."
    )

    def get_fields(self) -> dict[str, Any]:
        fields = super().get_fields()
        request = self.context.get("request")
        user = getattr(request, "user", None)
        if request is not None and not sees_chain_configuration(user):
            # Versions are for the people who publish them (the version endpoints answer
            # 404 to everyone else); callers just get what production serves.
            for name in _VERSION_STATE:
                fields.pop(name, None)
        return fields

    @extend_schema_field({"type": "object", "additionalProperties": {"type": "integer"}})
    def get_labels(self, chain: AdvisorChain) -> dict[str, int]:
        return {label.name: label.version.number for label in _label_rows(chain)}

    def get_latest_version(self, chain: AdvisorChain) -> int | None:
        if hasattr(chain, "latest_number"):
            latest: int | None = chain.latest_number
        else:
            latest = chain.versions.aggregate(latest=Max("number"))["latest"]
        return latest

    def get_draft_changed(self, chain: AdvisorChain) -> bool:
        production = next((r for r in _label_rows(chain) if r.name == PRODUCTION), None)
        if production is None:
            return True
        return snapshot_hash(resolve_draft(chain)) != production.version.snapshot_hash


_VERSION_STATE = ["labels", "latest_version", "draft_changed"]


class ChainSerializer(_VersionState, serializers.ModelSerializer):
    """What a client needs to call a chain, and where its versions stand."""

    tools = serializers.SerializerMethodField(
        help_text="Tools the model may call in what production serves (not the draft's)."
    )
    params_schema = serializers.SerializerMethodField(
        help_text="JSON Schema of the params a request may send to what production serves "
        "(null: the chain cannot run)."
    )

    class Meta:
        model = AdvisorChain
        fields = ["slug", "name", "description", "enabled", "tools", "params_schema"]
        fields += _VERSION_STATE
        read_only_fields = fields

    @extend_schema_field({**_OBJECT, "nullable": True})
    def get_params_schema(self, chain: AdvisorChain) -> dict[str, Any] | None:
        return _params_schema(chain)

    @extend_schema_field(serializers.ListField(child=serializers.CharField()))
    def get_tools(self, chain: AdvisorChain) -> list[str]:
        production = next((r for r in _label_rows(chain) if r.name == PRODUCTION), None)
        if production is None:
            return []
        return [tool["name"] for tool in production.version.snapshot["tools"]]


@extend_schema_field(
    {
        "oneOf": [{"type": "integer"}, {"type": "string", "example": "HIGHEST+200"}],
        "nullable": True,
    }
)
class OrderField(serializers.Field):
    """An advisor order: an integer, ``"HIGHEST+N"`` or ``"LOWEST-N"``; null: the type's default."""

    def to_internal_value(self, data: Any) -> int | None:
        from advisors_app.admin.forms import OrderField as FormOrderField

        if isinstance(data, bool) or not isinstance(data, (int, str)):
            raise serializers.ValidationError("Enter a whole number, HIGHEST+N or LOWEST-N.")
        try:
            value: int | None = FormOrderField(required=False).clean(str(data))
        except DjangoValidationError as exc:
            raise serializers.ValidationError(exc.messages) from None
        return value

    def to_representation(self, value: Any) -> int | None:
        return value


class AdvisorRowSerializer(serializers.ModelSerializer):
    """One advisor of a chain: a registered type key, its order, params checked by its schema."""

    order = OrderField(
        required=False,
        allow_null=True,
        help_text=f"Smaller runs first ({HIGHEST_PRECEDENCE}..{LOWEST_PRECEDENCE}); "
        "HIGHEST+N and LOWEST-N are accepted; null: the type's default.",
    )
    params = serializers.JSONField(required=False, help_text="Checked by the type's JSON Schema.")

    class Meta:
        model = AdvisorConfig
        fields = ["id", "advisor_type", "order", "enabled", "params"]
        read_only_fields = ["id"]
        ref_name = "ChainAdvisor"

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        attrs.setdefault("params", {})
        errors = params_errors(attrs["advisor_type"], attrs["params"])
        if errors:
            raise serializers.ValidationError(errors)
        return attrs


class LintMessageSerializer(serializers.Serializer):
    id = serializers.CharField()
    level = serializers.ChoiceField(choices=["error", "warning"])
    message = serializers.CharField()

    class Meta:
        ref_name = "LintMessage"


class SlugLookupField(serializers.SlugRelatedField):
    """A ``SlugRelatedField`` that refuses text PostgreSQL cannot hold before looking it up."""

    def to_internal_value(self, data: Any) -> Any:
        problem = text_problem(data) if isinstance(data, str) else None
        if problem:
            raise serializers.ValidationError(problem)
        return super().to_internal_value(data)


class ChainConfigSerializer(_VersionState, serializers.ModelSerializer):
    """A chain's whole configuration, for staff: create, replace, update."""

    chat_model = SlugLookupField(
        slug_field="slug",
        queryset=ChatModelConfig.objects.all(),
        allow_null=True,
        required=False,
        help_text="Slug of a chat-model configuration; null: ADVISORS['DEFAULT_CHAT_MODEL'].",
    )
    system_template = SlugLookupField(
        slug_field="slug",
        queryset=PromptTemplate.objects.all(),
        allow_null=True,
        required=False,
        help_text="Slug of a prompt template (instead of system_prompt).",
    )
    default_options = serializers.JSONField(required=False, help_text="Chat options.")
    advisors = AdvisorRowSerializer(
        many=True,
        required=False,
        help_text="The chain's advisors; a write that sends them replaces them all.",
    )
    params_schema = serializers.SerializerMethodField(
        help_text="JSON Schema of the request params of what production serves (null: the "
        "chain cannot run)."
    )
    lint = serializers.SerializerMethodField(
        help_text="Lint warnings of the saved draft (errors are refused at write)."
    )

    class Meta:
        model = AdvisorChain
        fields = [
            "slug",
            "name",
            "description",
            "enabled",
            "chat_model",
            "system_prompt",
            "system_template",
            "default_options",
            "tools",
            "advisors",
            "version_policy",
            "updated_at",
            "params_schema",
            "lint",
            *_VERSION_STATE,
        ]
        read_only_fields = ["updated_at"]
        ref_name = "ChainConfig"

    @extend_schema_field({**_OBJECT, "nullable": True})
    def get_params_schema(self, chain: AdvisorChain) -> dict[str, Any] | None:
        return _params_schema(chain)

    @extend_schema_field(LintMessageSerializer(many=True))
    def get_lint(self, chain: AdvisorChain) -> list[dict[str, str]]:
        return [
            {"id": m.id, "level": m.level, "message": str(m)} for m in check_draft(chain).messages
        ]

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        chain = copy.copy(self.instance) if self.instance is not None else AdvisorChain()
        for name, value in attrs.items():
            if name != "advisors":
                setattr(chain, name, value)
        if chain.default_options is None:
            chain.default_options = {}
        try:
            chain.clean()
        except DjangoValidationError as exc:
            raise serializers.ValidationError(exc.message_dict) from None
        rows: list[AdvisorConfig] | None = None
        if "advisors" in attrs or chain.pk is None:
            rows = [AdvisorConfig(**row) for row in attrs.get("advisors", ())]
        lint_errors = [f"{m.id}: {m}" for m in check_draft(chain, rows).messages if m.is_error]
        if lint_errors:
            raise serializers.ValidationError({"advisors": lint_errors})
        return attrs

    def _save_advisors(self, chain: AdvisorChain, rows: list[dict[str, Any]] | None) -> None:
        if rows is None:
            return
        chain.advisors.all().delete()
        for row in rows:
            AdvisorConfig.objects.create(chain=chain, **row)

    def create(self, validated_data: dict[str, Any]) -> AdvisorChain:
        rows = validated_data.pop("advisors", [])
        with transaction.atomic():
            chain = AdvisorChain.objects.create(**validated_data)
            self._save_advisors(chain, rows)
        chain.refresh_from_db()
        return chain

    def update(self, instance: AdvisorChain, validated_data: dict[str, Any]) -> AdvisorChain:
        rows = validated_data.pop("advisors", None)
        with transaction.atomic():
            for name, value in validated_data.items():
                setattr(instance, name, value)
            instance.save()
            self._save_advisors(instance, rows)
        instance.refresh_from_db()
        return instance


# -- versions and labels --------------------------------------------------------------------


def _text(value: str) -> str:
    """Refuses text PostgreSQL cannot store (a NUL, an unpaired surrogate) as a field error."""
    problem = text_problem(value)
    if problem:
        raise serializers.ValidationError(problem)
    return value


class ChainVersionSerializer(serializers.ModelSerializer):
    """One published version of a chain (immutable)."""

    created_by = serializers.SerializerMethodField(help_text="Username of who published it.")
    parent = serializers.SlugRelatedField(
        slug_field="number",
        read_only=True,
        help_text="The version this one was restored from (null: none).",
    )
    labels = serializers.SlugRelatedField(
        slug_field="name",
        many=True,
        read_only=True,
        help_text="Names of the labels pointing at this version.",
    )

    class Meta:
        model = ChainVersion
        fields = [
            "number",
            "snapshot_hash",
            "message",
            "created_by",
            "created_at",
            "parent",
            "labels",
        ]
        read_only_fields = fields
        ref_name = "ChainVersion"

    def get_created_by(self, version: ChainVersion) -> str | None:
        user = version.created_by
        return user.get_username() if user is not None else None


class ChainVersionDetailSerializer(ChainVersionSerializer):
    """A version with its snapshot: everything a turn of this version runs with."""

    snapshot = serializers.JSONField(
        read_only=True,
        help_text="The canonical snapshot: chat_model, system prompt or template, "
        "default_options, tools, advisors (type, order, enabled, params) and references "
        "(templates and word lists by content, collections by slug).",
    )

    class Meta(ChainVersionSerializer.Meta):
        fields = [*ChainVersionSerializer.Meta.fields, "snapshot"]
        read_only_fields = fields
        ref_name = "ChainVersionDetail"


def _note(help_text: str) -> serializers.CharField:
    """An optional note of up to 500 characters (a publish message, a label move's reason)."""
    return serializers.CharField(
        max_length=500,
        required=False,
        allow_blank=True,
        default="",
        validators=[_text],
        help_text=help_text,
    )


class PublishSerializer(serializers.Serializer):
    """``POST /api/chains/<slug>/versions/``: publish the draft."""

    message = _note("What changed, for the version list and the label history.")

    class Meta:
        ref_name = "Publish"


class ChainLabelSerializer(serializers.ModelSerializer):
    """A label: a named pointer at one version."""

    version = serializers.SlugRelatedField(
        slug_field="number", read_only=True, help_text="The version number it points at."
    )

    class Meta:
        model = ChainLabel
        fields = ["name", "version", "updated_at"]
        read_only_fields = fields
        ref_name = "ChainLabel"


class LabelMoveSerializer(serializers.Serializer):
    """``PUT /api/chains/<slug>/labels/<name>/``: point the label at a version."""

    version = serializers.IntegerField(
        min_value=1, max_value=2**31 - 1, help_text="A version number of this chain."
    )
    reason = _note("Why, for the label history.")

    class Meta:
        ref_name = "LabelMove"


class LabelRollbackSerializer(serializers.Serializer):
    """``POST /api/chains/<slug>/labels/<name>/rollback/``."""

    reason = _note('Why, for the label history (default: "roll back from vN").')

    class Meta:
        ref_name = "LabelRollback"


class ChainLabelEventSerializer(serializers.Serializer):
    """One move of a label (``from`` and ``to`` are version numbers)."""

    class Meta:
        ref_name = "ChainLabelEvent"

    def get_fields(self) -> dict[str, serializers.Field]:
        # "from" is a keyword, so the fields cannot be class attributes.
        return {
            "from": serializers.IntegerField(
                source="from_version.number",
                allow_null=True,
                read_only=True,
                help_text="The version it pointed at before (null: the label was created).",
            ),
            "to": serializers.IntegerField(source="to_version.number", read_only=True),
            "actor": serializers.CharField(
                source="actor.get_username",
                allow_null=True,
                read_only=True,
                help_text="Username of who moved it (null: a command or a deleted user).",
            ),
            "reason": serializers.CharField(read_only=True),
            "at": serializers.DateTimeField(read_only=True),
        }


class _AdvisorKeySerializer(serializers.Serializer):
    type = serializers.CharField()
    occurrence = serializers.IntegerField(help_text="1 for the first advisor of this type, ...")

    class Meta:
        ref_name = "DiffAdvisor"


class _AdvisorChangeSerializer(_AdvisorKeySerializer):
    params = serializers.ListField(child=serializers.CharField(), help_text="Changed params.")
    fields = serializers.ListField(
        child=serializers.CharField(), help_text="Changed fields: order, enabled."
    )

    class Meta:
        ref_name = "DiffAdvisorChange"


class _AdvisorDiffSerializer(serializers.Serializer):
    added = _AdvisorKeySerializer(many=True)
    removed = _AdvisorKeySerializer(many=True)
    reordered = serializers.BooleanField()
    changed = _AdvisorChangeSerializer(many=True)

    class Meta:
        ref_name = "DiffAdvisors"


class _TemplateDiffSerializer(serializers.Serializer):
    slug = serializers.CharField()
    diff = serializers.CharField(help_text="Unified diff of the template text.")

    class Meta:
        ref_name = "DiffTemplate"


class _WordListDiffSerializer(serializers.Serializer):
    slug = serializers.CharField()
    added = serializers.ListField(child=serializers.CharField())
    removed = serializers.ListField(child=serializers.CharField())

    class Meta:
        ref_name = "DiffWordList"


class ChainDiffSerializer(serializers.Serializer):
    """What changed from one snapshot to another (documentation of ``diff_snapshots``)."""

    class Meta:
        ref_name = "ChainDiff"

    def get_fields(self) -> dict[str, serializers.Field]:
        return {
            "from": serializers.CharField(help_text='What "from" named: "v3", "draft", ...'),
            "to": serializers.CharField(help_text='What "to" named: "production (v2)", ...'),
            "from_hash": serializers.CharField(),
            "to_hash": serializers.CharField(),
            "changed": serializers.BooleanField(help_text="Whether the hashes differ."),
            "text": serializers.CharField(
                allow_blank=True, help_text="Unified diff of the indented canonical snapshots."
            ),
            "chain": serializers.ListField(
                child=serializers.CharField(),
                help_text="Changed chain fields (chat_model, system_prompt, ...).",
            ),
            "system_prompt": serializers.CharField(
                allow_blank=True, help_text='Unified diff of the system text ("" when equal).'
            ),
            "advisors": _AdvisorDiffSerializer(),
            "templates": _TemplateDiffSerializer(many=True),
            "word_lists": _WordListDiffSerializer(many=True),
        }


class RestoreResultSerializer(serializers.Serializer):
    """``POST /api/chains/<slug>/versions/<n>/restore/``."""

    version = serializers.IntegerField(help_text="The version copied into the draft.")
    notes = serializers.ListField(
        child=serializers.CharField(),
        help_text="Where the draft still differs from the version (a shared template that "
        "was changed since, a collection missing here, ...).",
    )

    class Meta:
        ref_name = "RestoreResult"


# -- collections and documents ---------------------------------------------------------------


class CollectionSerializer(serializers.ModelSerializer):
    """A collection the caller may use; a new one is theirs.

    Slugs are unique across every user's collections (a chain names its collections by slug).
    A slug already taken says so in words that tell the caller nothing they may not see: "a
    collection you may use has it" for one in their list, and only "not available" for another
    user's or tenant's, never whose it is or what it is called.
    """

    slug = serializers.SlugField(max_length=100, help_text="Unique across all collections.")
    shared = serializers.SerializerMethodField(help_text="True: every user's; false: yours.")

    class Meta:
        model = Collection
        fields = ["slug", "name", "description", "shared", "created_at"]
        read_only_fields = ["created_at"]

    def get_shared(self, collection: Collection) -> bool:
        return collection.owner_id is None

    def _slug_taken(self, slug: str) -> str:
        request = self.context.get("request")
        if request is not None and visible_collections(request.user).filter(slug=slug).exists():
            return f"A collection you may use has the slug {slug!r} already: choose another."
        return f"The slug {slug!r} is not available: choose another."

    def validate_slug(self, value: str) -> str:
        taken = Collection.objects.filter(slug=value)
        if self.instance is not None:
            taken = taken.exclude(pk=self.instance.pk)
        if taken.exists():
            raise serializers.ValidationError(self._slug_taken(value))
        return value

    def create(self, validated_data: dict[str, Any]) -> Collection:
        try:
            with transaction.atomic():
                return super().create(validated_data)  # type: ignore[no-any-return]
        except IntegrityError as e:  # taken between validation and insert
            raise serializers.ValidationError(
                {"slug": [self._slug_taken(validated_data["slug"])]}
            ) from e


class DocumentSerializer(serializers.ModelSerializer):
    """One stored chunk: its text, metadata, source and whether it is yours."""

    collection = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    text = serializers.CharField(source="content", read_only=True)
    shared = serializers.SerializerMethodField(help_text="True: shared; false: yours.")

    class Meta:
        model = Document
        fields = ["id", "collection", "source", "text", "metadata", "shared", "created_at"]
        read_only_fields = fields

    def get_shared(self, document: Document) -> bool:
        return document.owner_id is None


class _MetadataMixin(serializers.Serializer):
    metadata = serializers.JSONField(
        required=False,
        help_text="A JSON object added to every chunk's metadata (multipart: its JSON text).",
    )

    def validate_metadata(self, value: Any) -> dict[str, Any]:
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise serializers.ValidationError("Enter a JSON object.")
        validate_json_value(value)
        return value


class TextUploadSerializer(_MetadataMixin):
    """A text document sent as JSON."""

    collection = serializers.SlugField(help_text="Slug of a collection you may use.")
    name = serializers.CharField(
        max_length=500, help_text="The source name (re-sending it replaces the document)."
    )
    text = serializers.CharField(help_text="Plain text or Markdown.")

    class Meta:
        ref_name = "TextUpload"


class FileUploadSerializer(_MetadataMixin):
    """Files sent as multipart form data (.txt, .md, .html, .pdf)."""

    collection = serializers.SlugField(help_text="Slug of a collection you may use.")
    file = serializers.ListField(
        child=serializers.FileField(max_length=500),
        allow_empty=False,
        help_text="One or more files; each file's name is its source name.",
    )

    class Meta:
        ref_name = "FileUpload"


class IngestResultSerializer(serializers.Serializer):
    source = serializers.CharField()
    chunks = serializers.IntegerField(help_text="Chunks of the source now stored.")
    added = serializers.IntegerField()
    unchanged = serializers.IntegerField()
    removed = serializers.IntegerField()

    class Meta:
        ref_name = "IngestResult"


class IngestionErrorSerializer(serializers.Serializer):
    source = serializers.CharField(
        allow_null=True, help_text="The file it is about; null: the job as a whole."
    )
    message = serializers.CharField(help_text="What went wrong, naming the limit it passed.")

    class Meta:
        ref_name = "IngestionError"


class IngestionJobSerializer(serializers.ModelSerializer):
    """An upload's ingestion, run by a task worker: poll it until ``done`` or ``failed``."""

    collection = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    done = serializers.IntegerField(help_text="Chunks embedded so far.")
    total = serializers.IntegerField(help_text="Chunks to embed; 0 until the files are read.")
    errors = IngestionErrorSerializer(many=True)
    documents = IngestResultSerializer(
        many=True, help_text="What each source became, once the job is done."
    )
    sources = serializers.ListField(child=serializers.CharField(), help_text="Its files.")
    url = serializers.SerializerMethodField(help_text="Where to poll it.")

    class Meta:
        model = IngestionJob
        fields = [
            "id",
            "status",
            "done",
            "total",
            "errors",
            "documents",
            "collection",
            "sources",
            "bytes",
            "created_at",
            "started_at",
            "finished_at",
            "url",
        ]
        read_only_fields = fields
        ref_name = "IngestionJob"

    def get_url(self, job: IngestionJob) -> str:
        return reverse("advisors_app:api-ingestion", args=[job.pk])


class SearchRequestSerializer(serializers.Serializer):
    collection = serializers.SlugField(help_text="Slug of a collection you may use.")
    query = serializers.CharField(max_length=8000)
    filter = serializers.CharField(
        required=False,
        allow_blank=True,
        allow_null=True,
        help_text="Spring AI's filter language over metadata, e.g. "
        "\"source == 'faq.md' && year >= 2024\".",
    )
    top_k = serializers.IntegerField(required=False, default=4, min_value=1, max_value=100)
    similarity_threshold = serializers.FloatField(
        required=False,
        default=0.0,
        min_value=0.0,
        max_value=1.0,
        help_text="Lowest cosine similarity kept (0 keeps everything).",
    )

    class Meta:
        ref_name = "Search"

    def validate_filter(self, value: str | None) -> Filter | None:
        if value is None or not value.strip():
            return None
        try:
            return FilterExpressionTextParser().parse(value)
        except ValueError as exc:
            raise serializers.ValidationError(str(exc)) from None


class SearchResultSerializer(serializers.Serializer):
    id = serializers.CharField()
    text = serializers.CharField()
    metadata = serializers.JSONField()
    score = serializers.FloatField(help_text="Cosine similarity (1 - cosine distance).")

    class Meta:
        ref_name = "SearchResult"
