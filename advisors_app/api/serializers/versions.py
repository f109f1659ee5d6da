"""Versions and labels of a chain, and diffs between snapshots
(:mod:`advisors_app.api.views.versions`).

Read-only here: every write (publish, move a label, roll back, restore) goes through
:mod:`advisors_app.definition` in the views; these serializers validate the request fields and
describe the answers.
"""

from __future__ import annotations

from rest_framework import serializers

from advisors_app.models import ChainLabel, ChainVersion
from advisors_app.validation import text_problem

__all__ = [
    "ChainDiffSerializer",
    "ChainLabelEventSerializer",
    "ChainLabelSerializer",
    "ChainVersionDetailSerializer",
    "ChainVersionSerializer",
    "LabelMoveSerializer",
    "LabelRollbackSerializer",
    "PublishSerializer",
    "RestoreResultSerializer",
]


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
