"""Experiments (issue 37): experiments, arms and events; a call log's experiment and arm."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

import advisors_app.models.experiments


class Migration(migrations.Migration):
    dependencies = [
        ("advisors_app", "0022_hybrid_retrieval"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name="calllog",
            name="experiment_arm",
            field=models.CharField(blank=True, max_length=100),
        ),
        migrations.CreateModel(
            name="Experiment",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("name", models.CharField(max_length=200)),
                ("label", models.CharField(default="production", max_length=50)),
                (
                    "status",
                    models.CharField(
                        choices=[
                            ("draft", "Draft"),
                            ("running", "Running"),
                            ("paused", "Paused"),
                            ("stopped", "Stopped"),
                            ("concluded", "Concluded"),
                        ],
                        default="draft",
                        max_length=16,
                    ),
                ),
                (
                    "unit",
                    models.CharField(
                        choices=[
                            ("user", "User"),
                            ("conversation", "Conversation"),
                            ("tenant", "Tenant"),
                        ],
                        default="user",
                        max_length=16,
                    ),
                ),
                (
                    "salt",
                    models.CharField(default=advisors_app.models.experiments._salt, max_length=64),
                ),
                ("guardrails", models.JSONField(blank=True, default=list)),
                ("targeting", models.JSONField(blank=True, default=list)),
                ("ramp", models.JSONField(blank=True, default=dict)),
                ("ramp_step", models.PositiveSmallIntegerField(default=0)),
                ("step_started_at", models.DateTimeField(blank=True, null=True)),
                ("revision", models.PositiveIntegerField(default=1)),
                ("winner", models.CharField(blank=True, max_length=100)),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                ("updated_at", models.DateTimeField(auto_now=True)),
                ("started_at", models.DateTimeField(blank=True, null=True)),
                ("ended_at", models.DateTimeField(blank=True, null=True)),
                (
                    "chain",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="experiments",
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
            ],
            options={
                "ordering": ["-created_at", "-pk"],
                "permissions": [
                    ("run_experiment", "Can create, start, pause, stop and conclude experiments")
                ],
            },
        ),
        migrations.AddField(
            model_name="calllog",
            name="experiment",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="call_logs",
                to="advisors_app.experiment",
            ),
        ),
        migrations.CreateModel(
            name="ExperimentArm",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("name", models.SlugField(max_length=100)),
                (
                    "weight",
                    models.PositiveIntegerField(help_text="Basis points: the arms sum to 10000."),
                ),
                ("position", models.PositiveSmallIntegerField(default=0)),
                (
                    "experiment",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="arms",
                        to="advisors_app.experiment",
                    ),
                ),
                (
                    "version",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.RESTRICT,
                        related_name="experiment_arms",
                        to="advisors_app.chainversion",
                    ),
                ),
            ],
            options={
                "ordering": ["experiment", "position"],
            },
        ),
        migrations.CreateModel(
            name="ExperimentEvent",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("from_status", models.CharField(blank=True, max_length=16)),
                ("to_status", models.CharField(max_length=16)),
                ("reason", models.CharField(blank=True, max_length=500)),
                ("detail", models.JSONField(blank=True, default=dict)),
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
                    "experiment",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="events",
                        to="advisors_app.experiment",
                    ),
                ),
            ],
            options={
                "verbose_name": "experiment event",
                "ordering": ["-at", "-id"],
            },
        ),
        migrations.AddIndex(
            model_name="experiment",
            index=models.Index(fields=["chain", "label", "status"], name="advisors_exp_serving"),
        ),
        migrations.AddConstraint(
            model_name="experiment",
            constraint=models.UniqueConstraint(
                condition=models.Q(("status__in", ["running", "paused"])),
                fields=("chain", "label"),
                name="advisors_one_active_experiment_per_label",
            ),
        ),
        migrations.AddConstraint(
            model_name="experimentarm",
            constraint=models.UniqueConstraint(
                fields=("experiment", "name"), name="advisors_arm_name"
            ),
        ),
        migrations.AddConstraint(
            model_name="experimentarm",
            constraint=models.UniqueConstraint(
                fields=("experiment", "version"), name="advisors_arm_version"
            ),
        ),
    ]
