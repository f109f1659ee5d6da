"""Hybrid retrieval (issue 41): collection search defaults, context lines, the lexical index.

Existing chunks get their lexical index here, from their text, in batches (what
``manage.py reindex --lexical`` does later after a configuration change).
"""

import django.contrib.postgres.indexes
import django.contrib.postgres.search
import django.core.validators
from django.conf import settings
from django.db import migrations, models

BATCH = 500


def index_existing_chunks(apps, schema_editor):
    from advisors_app.models.documents import lexical_vector

    Document = apps.get_model("advisors_app", "Document")
    rows = Document.objects.filter(search_vector__isnull=True).order_by("pk")
    while True:
        batch = list(rows.values_list("pk", "content")[:BATCH])
        if not batch:
            return
        indexed = [
            Document(pk=pk, search_vector=lexical_vector("english", content))
            for pk, content in batch
        ]
        Document.objects.bulk_update(indexed, ["search_vector"])


class Migration(migrations.Migration):
    dependencies = [
        ("advisors_app", "0021_eval_repeats_and_gate_margin"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name="collection",
            name="lexical_weight",
            field=models.FloatField(
                default=0.7,
                help_text="Hybrid search: weight of the full-text ranking in the fusion.",
                validators=[
                    django.core.validators.MinValueValidator(0.0),
                    django.core.validators.MaxValueValidator(10.0),
                ],
            ),
        ),
        migrations.AddField(
            model_name="collection",
            name="rrf_k",
            field=models.PositiveSmallIntegerField(
                default=5,
                help_text=(
                    "Hybrid search: k of reciprocal rank fusion, weight / (k + rank); "
                    "smaller favours each ranking's first documents."
                ),
                validators=[
                    django.core.validators.MinValueValidator(1),
                    django.core.validators.MaxValueValidator(1000),
                ],
            ),
        ),
        migrations.AddField(
            model_name="collection",
            name="search_mode",
            field=models.CharField(
                choices=[("vector", "vector"), ("lexical", "lexical"), ("hybrid", "hybrid")],
                default="vector",
                help_text=(
                    "How searches run unless a chain says otherwise: vector (embeddings), "
                    "lexical (full text) or hybrid (both, fused by reciprocal rank)."
                ),
                max_length=10,
            ),
        ),
        migrations.AddField(
            model_name="collection",
            name="text_search_config",
            field=models.CharField(
                default="english",
                help_text=(
                    "PostgreSQL text search configuration of the full-text index "
                    "(english, german, simple, ...). Run manage.py reindex after changing "
                    "it."
                ),
                max_length=63,
            ),
        ),
        migrations.AddField(
            model_name="collection",
            name="vector_weight",
            field=models.FloatField(
                default=1.0,
                help_text="Hybrid search: weight of the vector ranking in the fusion.",
                validators=[
                    django.core.validators.MinValueValidator(0.0),
                    django.core.validators.MaxValueValidator(10.0),
                ],
            ),
        ),
        migrations.AddField(
            model_name="document",
            name="context",
            field=models.TextField(
                blank=True,
                db_default="",
                default="",
                help_text=(
                    "The chunk's context line (document title and heading path): embedded "
                    "and indexed with the text, never shown as part of it."
                ),
            ),
        ),
        migrations.AddField(
            model_name="document",
            name="search_vector",
            field=django.contrib.postgres.search.SearchVectorField(editable=False, null=True),
        ),
        migrations.RunPython(index_existing_chunks, migrations.RunPython.noop, elidable=True),
        migrations.AddIndex(
            model_name="document",
            index=django.contrib.postgres.indexes.GinIndex(
                fields=["search_vector"], name="advisors_document_lexical"
            ),
        ),
        migrations.AddConstraint(
            model_name="collection",
            constraint=models.CheckConstraint(
                condition=models.Q(("search_mode__in", ("vector", "lexical", "hybrid"))),
                name="advisors_collection_search_mode",
            ),
        ),
    ]
