"""Collections, documents, uploads and their ingestion jobs, and similarity search
(:mod:`advisors_app.api.views.documents`)."""

from __future__ import annotations

from typing import Any

from django.db import IntegrityError, transaction
from django.urls import reverse
from rest_framework import serializers

from advisors_app.core.vectorstore import Filter, FilterExpressionTextParser
from advisors_app.models import Collection, Document, IngestionJob
from advisors_app.validation import validate_json_value

__all__ = [
    "CollectionSerializer",
    "DocumentSerializer",
    "FileUploadSerializer",
    "IngestResultSerializer",
    "IngestionErrorSerializer",
    "IngestionJobSerializer",
    "SearchRequestSerializer",
    "SearchResultSerializer",
    "TextUploadSerializer",
]


class CollectionSerializer(serializers.ModelSerializer):
    """A collection the caller may use; a new one is theirs.

    Slugs are unique across every user's collections: a chain names its collections by slug,
    and every store, upload and search finds one by it (scoping slugs per owner would give a
    chain's slug a different collection per user). A slug already taken gets one answer
    whoever holds it — shared, the caller's own, another user's or another tenant's — so the
    answer says only that the slug is in use, never whose collection it is, whether the caller
    could see it, or what it is called (issue 36).
    """

    slug = serializers.SlugField(max_length=100, help_text="Unique across all collections.")
    shared = serializers.SerializerMethodField(help_text="True: every user's; false: yours.")

    class Meta:
        model = Collection
        fields = ["slug", "name", "description", "shared", "created_at"]
        read_only_fields = ["created_at"]

    def get_shared(self, collection: Collection) -> bool:
        return collection.owner_id is None

    @staticmethod
    def _slug_taken(slug: str) -> str:
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
