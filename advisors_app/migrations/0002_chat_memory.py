"""Chat memory: conversations and their messages, ordered by a per-conversation sequence."""

import django.core.serializers.json
import django.db.models.deletion
import django.utils.timezone
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("advisors_app", "0001_vector_extension"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="Conversation",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("conversation_id", models.CharField(max_length=255, unique=True)),
                ("title", models.CharField(blank=True, max_length=200)),
                ("last_sequence", models.BigIntegerField(default=0, editable=False)),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                ("updated_at", models.DateTimeField(auto_now=True)),
                (
                    "owner",
                    models.ForeignKey(
                        blank=True,
                        help_text="The user who may see and continue this conversation.",
                        null=True,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="advisor_conversations",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
            ],
            options={
                "ordering": ["-updated_at"],
            },
        ),
        migrations.CreateModel(
            name="ChatMessage",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("sequence", models.BigIntegerField()),
                (
                    "message_type",
                    models.CharField(
                        choices=[
                            ("user", "User"),
                            ("assistant", "Assistant"),
                            ("system", "System"),
                            ("tool", "Tool"),
                        ],
                        max_length=16,
                    ),
                ),
                ("text", models.TextField(blank=True)),
                (
                    "metadata",
                    models.JSONField(
                        blank=True,
                        default=dict,
                        encoder=django.core.serializers.json.DjangoJSONEncoder,
                    ),
                ),
                ("tool_calls", models.JSONField(blank=True, default=list)),
                ("tool_responses", models.JSONField(blank=True, default=list)),
                ("media", models.JSONField(blank=True, default=list)),
                ("created_at", models.DateTimeField(default=django.utils.timezone.now)),
                (
                    "conversation",
                    models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="messages",
                        to="advisors_app.conversation",
                    ),
                ),
            ],
            options={
                "ordering": ["conversation", "sequence"],
                "indexes": [
                    models.Index(
                        condition=models.Q(("message_type", "system")),
                        fields=["conversation", "sequence"],
                        name="advisors_chatmessage_system",
                    )
                ],
                "constraints": [
                    models.UniqueConstraint(
                        fields=("conversation", "sequence"),
                        name="advisors_chatmessage_sequence_unique",
                    )
                ],
            },
        ),
    ]
