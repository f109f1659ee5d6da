"""Ingestion jobs and their files (issue 18): uploads run by a task worker."""

import uuid

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("advisors_app", "0009_publish_existing_chains"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="IngestionJob",
            fields=[
                (
                    "id",
                    models.UUIDField(
                        default=uuid.uuid4, editable=False, primary_key=True, serialize=False
                    ),
                ),
                ("tenant", models.CharField(blank=True, max_length=100)),
                (
                    "metadata",
                    models.JSONField(blank=True, default=dict, help_text="Added to every chunk."),
                ),
                (
                    "options",
                    models.JSONField(
                        blank=True, default=dict, help_text="chunk_size, chunk_overlap, batch_size."
                    ),
                ),
                ("limits", models.JSONField(blank=True, default=dict)),
                (
                    "sources",
                    models.JSONField(blank=True, default=list, help_text="The names of its files."),
                ),
                (
                    "bytes",
                    models.PositiveBigIntegerField(default=0, help_text="Size of its files."),
                ),
                (
                    "status",
                    models.CharField(
                        choices=[
                            ("queued", "Queued"),
                            ("running", "Running"),
                            ("done", "Done"),
                            ("failed", "Failed"),
                        ],
                        db_index=True,
                        default="queued",
                        max_length=8,
                    ),
                ),
                (
                    "done",
                    models.PositiveIntegerField(default=0, help_text="Chunks embedded so far."),
                ),
                (
                    "total",
                    models.PositiveIntegerField(
                        default=0, help_text="Chunks to embed (known once read)."
                    ),
                ),
                ("errors", models.JSONField(blank=True, default=list)),
                ("documents", models.JSONField(blank=True, default=list)),
                ("cpu_seconds", models.FloatField(default=0.0)),
                (
                    "task_id",
                    models.CharField(blank=True, help_text="The task's result id.", max_length=64),
                ),
                ("created_at", models.DateTimeField(auto_now_add=True, db_index=True)),
                ("started_at", models.DateTimeField(blank=True, null=True)),
                ("finished_at", models.DateTimeField(blank=True, null=True)),
                (
                    "collection",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="ingestion_jobs",
                        to="advisors_app.collection",
                    ),
                ),
                (
                    "created_by",
                    models.ForeignKey(
                        blank=True,
                        help_text="Who submitted it (empty: the ingest command).",
                        null=True,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="advisor_ingestion_jobs",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
                (
                    "owner",
                    models.ForeignKey(
                        blank=True,
                        help_text="Owner of the chunks it stores (empty: shared).",
                        null=True,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
            ],
            options={
                "ordering": ["-created_at"],
            },
        ),
        migrations.CreateModel(
            name="IngestionFile",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("position", models.PositiveIntegerField()),
                ("name", models.CharField(max_length=500)),
                ("content_type", models.CharField(blank=True, max_length=200)),
                ("as_text", models.BooleanField(default=False)),
                ("size", models.PositiveBigIntegerField()),
                ("data", models.BinaryField()),
                (
                    "job",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="files",
                        to="advisors_app.ingestionjob",
                    ),
                ),
            ],
            options={
                "ordering": ["job", "position"],
            },
        ),
        migrations.AddIndex(
            model_name="ingestionjob",
            index=models.Index(fields=["created_by", "created_at"], name="advisors_job_user"),
        ),
        migrations.AddConstraint(
            model_name="ingestionfile",
            constraint=models.UniqueConstraint(
                fields=("job", "position"), name="advisors_job_file_position"
            ),
        ),
    ]
