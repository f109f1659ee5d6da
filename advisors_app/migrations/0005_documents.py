"""Collections and documents with pgvector embeddings and an HNSW cosine index."""

import django.db.models.deletion
import pgvector.django.indexes
import pgvector.django.vector
from django.conf import settings
from django.db import migrations, models

import advisors_app.models.documents


class Migration(migrations.Migration):
    dependencies = [
        ("advisors_app", "0004_semantic_cache"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="Collection",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("slug", models.SlugField(max_length=100, unique=True)),
                ("name", models.CharField(max_length=200)),
                ("description", models.TextField(blank=True)),
                ("tenant", models.CharField(blank=True, db_index=True, max_length=100)),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                ("updated_at", models.DateTimeField(auto_now=True)),
                (
                    "owner",
                    models.ForeignKey(
                        blank=True,
                        help_text="Only this user may use the collection; leave empty to share it.",
                        null=True,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="advisor_collections",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
            ],
            options={
                "ordering": ["slug"],
            },
        ),
        migrations.CreateModel(
            name="Document",
            fields=[
                (
                    "id",
                    models.CharField(
                        default=advisors_app.models.documents._new_id,
                        editable=False,
                        max_length=255,
                        primary_key=True,
                        serialize=False,
                    ),
                ),
                ("tenant", models.CharField(blank=True, db_index=True, max_length=100)),
                (
                    "source",
                    models.CharField(
                        blank=True,
                        help_text="Where the text came from (file or upload name).",
                        max_length=500,
                    ),
                ),
                ("content", models.TextField()),
                ("metadata", models.JSONField(blank=True, default=dict)),
                ("content_hash", models.CharField(editable=False, max_length=64)),
                ("embedding", pgvector.django.vector.VectorField(dimensions=384)),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                (
                    "collection",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="documents",
                        to="advisors_app.collection",
                    ),
                ),
                (
                    "owner",
                    models.ForeignKey(
                        blank=True,
                        help_text="Only this user may retrieve it; leave empty to share it.",
                        null=True,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="advisor_documents",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
            ],
            options={
                "ordering": ["collection", "source", "created_at"],
                "indexes": [
                    pgvector.django.indexes.HnswIndex(
                        ef_construction=64,
                        fields=["embedding"],
                        m=16,
                        name="advisors_document_hnsw",
                        opclasses=["vector_cosine_ops"],
                    ),
                    models.Index(fields=["collection", "source"], name="advisors_document_source"),
                ],
                "constraints": [
                    models.UniqueConstraint(
                        condition=models.Q(("source", ""), _negated=True),
                        fields=("collection", "owner", "tenant", "source", "content_hash"),
                        name="advisors_document_unique_text",
                        nulls_distinct=False,
                    )
                ],
            },
        ),
    ]
