"""Semantic-cache entries with a 384-dimensional embedding and an HNSW cosine index."""

import django.core.serializers.json
import django.utils.timezone
import pgvector.django.indexes
import pgvector.django.vector
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("advisors_app", "0003_audit_entries"),
    ]

    operations = [
        migrations.CreateModel(
            name="SemanticCacheEntry",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("scope", models.CharField(max_length=64)),
                ("query", models.TextField()),
                ("embedding", pgvector.django.vector.VectorField(dimensions=384)),
                (
                    "response",
                    models.JSONField(encoder=django.core.serializers.json.DjangoJSONEncoder),
                ),
                ("created_at", models.DateTimeField(default=django.utils.timezone.now)),
                ("expires_at", models.DateTimeField(blank=True, null=True)),
                ("hit_count", models.PositiveIntegerField(default=0)),
                ("last_hit_at", models.DateTimeField(blank=True, null=True)),
            ],
            options={
                "verbose_name": "semantic cache entry",
                "verbose_name_plural": "semantic cache entries",
                "indexes": [
                    pgvector.django.indexes.HnswIndex(
                        ef_construction=64,
                        fields=["embedding"],
                        m=16,
                        name="advisors_semcache_hnsw",
                        opclasses=["vector_cosine_ops"],
                    ),
                    models.Index(fields=["scope", "expires_at"], name="advisors_semcache_scope"),
                ],
            },
        ),
    ]
