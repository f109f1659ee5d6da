"""A chain as callers see it, and its whole configuration for staff
(:mod:`advisors_app.api.views.chains`).

Chain writes validate through the registry (:func:`advisors_app.definition.registry.params_errors`),
the model's own ``clean()`` and the definition pipeline
(:func:`advisors_app.definition.check_draft`: lint and compile), so the API, the admin and the
runtime agree.
"""

from __future__ import annotations

import copy
from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import transaction
from django.db.models import Max, Prefetch, QuerySet
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from advisors_app.api.permissions import sees_chain_configuration
from advisors_app.api.serializers.fields import OrderField, SlugLookupField
from advisors_app.core.advisor import HIGHEST_PRECEDENCE, LOWEST_PRECEDENCE
from advisors_app.definition import check_draft, resolve_draft, snapshot_hash
from advisors_app.definition.registry import params_errors
from advisors_app.definition.runtime import (
    ChainConfigurationError,
    ChainNotFound,
    VersionNotFound,
    load_chain,
)
from advisors_app.models import (
    PRODUCTION,
    AdvisorChain,
    AdvisorConfig,
    ChainLabel,
    ChatModelConfig,
    PromptTemplate,
)

__all__ = [
    "AdvisorRowSerializer",
    "ChainConfigSerializer",
    "ChainSerializer",
    "LintMessageSerializer",
    "with_version_state",
]

_OBJECT = {"type": "object", "additionalProperties": {}}


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
