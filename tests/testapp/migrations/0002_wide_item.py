"""A 3072-dimensional test table: the halfvec expression index for embeddings over 2000 dims."""

import django.contrib.postgres.indexes
import django.db.models.functions.comparison
import pgvector.django.halfvec
import pgvector.django.indexes
import pgvector.django.vector
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("testapp", "0001_initial"),
    ]

    operations = [
        migrations.CreateModel(
            name="WideItem",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("embedding", pgvector.django.vector.VectorField(dimensions=3072)),
            ],
            options={
                "indexes": [
                    pgvector.django.indexes.HnswIndex(
                        django.contrib.postgres.indexes.OpClass(
                            django.db.models.functions.comparison.Cast(
                                "embedding",
                                pgvector.django.halfvec.HalfVectorField(dimensions=3072),
                            ),
                            name="halfvec_cosine_ops",
                        ),
                        ef_construction=64,
                        m=16,
                        name="testapp_wide_hnsw",
                    )
                ],
            },
        ),
    ]
