"""JSON fields edited by people refuse what PostgreSQL cannot store (NUL, lone surrogates, NaN)."""

from django.db import migrations, models

import advisors_app.validation

SETTINGS_HELP = (
    'Other provider settings as a JSON object, e.g. scripted: {"responses": ["Hi!"], '
    '"repeat": true}; openai: {"include_usage": true}.'
)


def settings_field() -> models.JSONField:
    return models.JSONField(
        blank=True,
        default=dict,
        help_text=SETTINGS_HELP,
        validators=[advisors_app.validation.validate_json_value],
    )


class Migration(migrations.Migration):
    dependencies = [
        ("advisors_app", "0006_chains"),
    ]

    operations = [
        migrations.AlterField(
            model_name="chatmodelconfig", name="settings", field=settings_field()
        ),
        migrations.AlterField(
            model_name="embeddingmodelconfig", name="settings", field=settings_field()
        ),
        migrations.AlterField(
            model_name="document",
            name="metadata",
            field=models.JSONField(
                blank=True,
                default=dict,
                validators=[advisors_app.validation.validate_json_value],
            ),
        ),
    ]
