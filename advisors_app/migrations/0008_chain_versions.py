import django.contrib.postgres.fields
import django.contrib.postgres.indexes
import django.core.validators
import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("advisors_app", "0007_json_values_are_storable"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.RemoveField(
            model_name="advisorchain",
            name="config_hash",
        ),
        migrations.RemoveField(
            model_name="advisorchain",
            name="references",
        ),
        migrations.AddField(
            model_name="advisorchain",
            name="version_policy",
            field=models.CharField(
                choices=[
                    ("pin", "Keep the version the conversation started on"),
                    ("follow_label", "Follow the label"),
                ],
                default="pin",
                help_text="Which version a continued conversation runs: the one it started on, "
                "or whatever its label points at now.",
                max_length=16,
            ),
        ),
        migrations.AddField(
            model_name="calllog",
            name="label",
            field=models.CharField(blank=True, max_length=50),
        ),
        migrations.AlterField(
            model_name="advisorchain",
            name="enabled",
            field=models.BooleanField(default=True, help_text="Off: the chain serves nobody."),
        ),
        migrations.CreateModel(
            name="ChainLabel",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                (
                    "name",
                    models.CharField(
                        max_length=50,
                        validators=[
                            django.core.validators.RegexValidator(
                                "\\A(?!draft\\Z)[a-z][a-z0-9_-]{0,49}\\Z",
                                "Use 1 to 50 lower-case letters, digits, '-' and '_', "
                                "starting with a letter (not 'draft', which names the "
                                "editable rows).",
                            )
                        ],
                    ),
                ),
                ("updated_at", models.DateTimeField(auto_now=True)),
                (
                    "chain",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="labels",
                        to="advisors_app.advisorchain",
                    ),
                ),
            ],
            options={
                "verbose_name": "chain label",
                "ordering": ["chain", "name"],
                "permissions": [("promote_production", "Can move the production label of a chain")],
            },
        ),
        migrations.CreateModel(
            name="ChainVersion",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("number", models.PositiveIntegerField()),
                ("snapshot", models.JSONField()),
                ("snapshot_hash", models.CharField(db_index=True, max_length=64)),
                (
                    "references",
                    django.contrib.postgres.fields.ArrayField(
                        base_field=models.CharField(max_length=200),
                        blank=True,
                        default=list,
                        size=None,
                    ),
                ),
                ("message", models.CharField(blank=True, max_length=500)),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                (
                    "chain",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="versions",
                        to="advisors_app.advisorchain",
                    ),
                ),
                (
                    "created_by",
                    models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
                (
                    "parent",
                    models.ForeignKey(
                        blank=True,
                        help_text="The version this one was restored from, if any.",
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="+",
                        to="advisors_app.chainversion",
                    ),
                ),
            ],
            options={
                "verbose_name": "chain version",
                "ordering": ["chain", "-number"],
            },
        ),
        migrations.CreateModel(
            name="ChainLabelEvent",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("reason", models.CharField(blank=True, max_length=500)),
                ("rollback", models.BooleanField(default=False)),
                ("at", models.DateTimeField(auto_now_add=True, db_index=True)),
                (
                    "actor",
                    models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
                (
                    "label",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="events",
                        to="advisors_app.chainlabel",
                    ),
                ),
                (
                    "from_version",
                    models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.RESTRICT,
                        related_name="+",
                        to="advisors_app.chainversion",
                    ),
                ),
                (
                    "to_version",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.RESTRICT,
                        related_name="+",
                        to="advisors_app.chainversion",
                    ),
                ),
            ],
            options={
                "verbose_name": "label event",
                "ordering": ["-at", "-id"],
            },
        ),
        migrations.AddField(
            model_name="chainlabel",
            name="version",
            field=models.ForeignKey(
                on_delete=django.db.models.deletion.RESTRICT,
                related_name="labels",
                to="advisors_app.chainversion",
            ),
        ),
        migrations.AddField(
            model_name="advisorchain",
            name="restored_from",
            field=models.ForeignKey(
                blank=True,
                editable=False,
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="+",
                to="advisors_app.chainversion",
            ),
        ),
        migrations.AddField(
            model_name="calllog",
            name="chain_version",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.RESTRICT,
                related_name="call_logs",
                to="advisors_app.chainversion",
            ),
        ),
        migrations.AddField(
            model_name="conversation",
            name="chain_version",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.RESTRICT,
                related_name="conversations",
                to="advisors_app.chainversion",
            ),
        ),
        migrations.AddIndex(
            model_name="chainversion",
            index=django.contrib.postgres.indexes.GinIndex(
                fields=["references"], name="chain_version_references"
            ),
        ),
        migrations.AddConstraint(
            model_name="chainversion",
            constraint=models.UniqueConstraint(
                fields=("chain", "number"), name="chain_version_number"
            ),
        ),
        migrations.AddConstraint(
            model_name="chainlabel",
            constraint=models.UniqueConstraint(fields=("chain", "name"), name="chain_label_name"),
        ),
    ]
