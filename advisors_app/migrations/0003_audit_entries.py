"""Audit entries written by AuditAdvisor through DjangoAuditSink."""

import django.core.serializers.json
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("advisors_app", "0002_chat_memory"),
    ]

    operations = [
        migrations.CreateModel(
            name="AuditEntry",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("created_at", models.DateTimeField(auto_now_add=True, db_index=True)),
                ("started_at", models.DateTimeField()),
                (
                    "mode",
                    models.CharField(
                        choices=[("call", "Call"), ("stream", "Stream")], max_length=8
                    ),
                ),
                (
                    "status",
                    models.CharField(
                        choices=[
                            ("completed", "Completed"),
                            ("error", "Error"),
                            ("interrupted", "Interrupted"),
                        ],
                        db_index=True,
                        max_length=16,
                    ),
                ),
                ("conversation_id", models.CharField(blank=True, db_index=True, max_length=255)),
                ("request_text", models.TextField(blank=True)),
                (
                    "prompt",
                    models.JSONField(
                        default=list, encoder=django.core.serializers.json.DjangoJSONEncoder
                    ),
                ),
                ("response_text", models.TextField(blank=True, null=True)),
                ("finish_reason", models.CharField(blank=True, max_length=64)),
                (
                    "usage",
                    models.JSONField(
                        blank=True,
                        encoder=django.core.serializers.json.DjangoJSONEncoder,
                        null=True,
                    ),
                ),
                (
                    "duration",
                    models.FloatField(
                        help_text="Seconds from the request to the end of the answer."
                    ),
                ),
                ("error", models.TextField(blank=True)),
                (
                    "context",
                    models.JSONField(
                        default=dict, encoder=django.core.serializers.json.DjangoJSONEncoder
                    ),
                ),
            ],
            options={
                "verbose_name": "audit entry",
                "verbose_name_plural": "audit entries",
                "ordering": ["-created_at", "-id"],
            },
        ),
    ]
