"""The provider-neutral finish category on the call log (issue 43), beside the raw reason."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("advisors_app", "0026_conversation_listed")]

    operations = [
        migrations.AddField(
            model_name="calllog",
            name="finish_category",
            field=models.CharField(
                blank=True,
                choices=[
                    ("stop", "stop"),
                    ("length", "length"),
                    ("tool_calls", "tool calls"),
                    ("content_filter", "content filter"),
                    ("guardrail", "guardrail"),
                    ("approval_required", "approval required"),
                    ("cancelled", "cancelled"),
                    ("error", "error"),
                ],
                max_length=20,
            ),
        ),
    ]
