"""Chains as data: model configurations, chains, advisor rows, word lists, templates, logs."""

import django.contrib.postgres.fields
import django.core.validators
import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("advisors_app", "0005_documents"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="AdvisorChain",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                (
                    "slug",
                    models.SlugField(
                        help_text="Used in URLs and the API.", max_length=100, unique=True
                    ),
                ),
                ("name", models.CharField(max_length=200)),
                ("description", models.TextField(blank=True)),
                ("system_prompt", models.TextField(blank=True, help_text="Default system text.")),
                (
                    "default_options",
                    models.JSONField(
                        blank=True,
                        default=dict,
                        help_text=(
                            'Chat options as JSON, e.g. {"temperature": 0.2, "max_tokens": 512}.'
                        ),
                    ),
                ),
                (
                    "tools",
                    django.contrib.postgres.fields.ArrayField(
                        base_field=models.CharField(max_length=100),
                        blank=True,
                        default=list,
                        help_text=(
                            "Names of tools from advisors_app.tools.tool_registry, comma-separated."
                        ),
                        size=None,
                    ),
                ),
                ("enabled", models.BooleanField(default=True)),
                ("config_hash", models.CharField(blank=True, editable=False, max_length=64)),
                (
                    "references",
                    django.contrib.postgres.fields.ArrayField(
                        base_field=models.CharField(max_length=200),
                        default=list,
                        editable=False,
                        size=None,
                    ),
                ),
                ("updated_at", models.DateTimeField(auto_now=True)),
            ],
            options={
                "verbose_name": "advisor chain",
                "ordering": ["slug"],
            },
        ),
        migrations.CreateModel(
            name="ChatModelConfig",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                (
                    "slug",
                    models.SlugField(help_text="Key chains refer to.", max_length=100, unique=True),
                ),
                ("name", models.CharField(blank=True, max_length=200)),
                (
                    "provider",
                    models.CharField(
                        choices=[
                            ("embedded", "Embedded (in-process, no key)"),
                            ("openai", "OpenAI-compatible HTTP API"),
                            ("scripted", "Scripted (fake, for tests and demos)"),
                        ],
                        default="embedded",
                        max_length=32,
                    ),
                ),
                (
                    "model",
                    models.CharField(
                        blank=True, help_text="Model name sent to the provider.", max_length=200
                    ),
                ),
                (
                    "base_url",
                    models.URLField(
                        blank=True,
                        help_text="Endpoint of an OpenAI-compatible server.",
                        max_length=500,
                    ),
                ),
                (
                    "api_key_env",
                    models.CharField(
                        blank=True,
                        help_text=(
                            "Name of the environment variable that holds the "
                            "API key (not the key). Blank: OPENAI_API_KEY for "
                            "OpenAI itself, no key for a server at a base URL."
                        ),
                        max_length=100,
                        validators=[
                            django.core.validators.RegexValidator(
                                "^[A-Za-z_][A-Za-z0-9_]*$",
                                (
                                    "Enter the NAME of an environment variable (for "
                                    "example OPENAI_API_KEY), never the key."
                                ),
                            )
                        ],
                        verbose_name="API key variable",
                    ),
                ),
                (
                    "timeout",
                    models.FloatField(
                        default=60.0,
                        help_text="Seconds to wait for the provider before giving up.",
                        validators=[django.core.validators.MinValueValidator(0.1)],
                    ),
                ),
                (
                    "max_retries",
                    models.PositiveSmallIntegerField(
                        default=2,
                        help_text="Retries of a failed provider request (timeouts, 429, 5xx).",
                    ),
                ),
                (
                    "settings",
                    models.JSONField(
                        blank=True,
                        default=dict,
                        help_text=(
                            "Other provider settings as a JSON object, e.g. "
                            'scripted: {"responses": ["Hi!"], "repeat": true}; '
                            'openai: {"include_usage": true}.'
                        ),
                    ),
                ),
                ("updated_at", models.DateTimeField(auto_now=True)),
                (
                    "options",
                    models.JSONField(
                        blank=True,
                        default=dict,
                        help_text='Default chat options as JSON, e.g. {"temperature": 0.2}.',
                    ),
                ),
            ],
            options={
                "verbose_name": "chat model",
                "ordering": ["slug"],
                "abstract": False,
            },
        ),
        migrations.CreateModel(
            name="EmbeddingModelConfig",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                (
                    "slug",
                    models.SlugField(help_text="Key chains refer to.", max_length=100, unique=True),
                ),
                ("name", models.CharField(blank=True, max_length=200)),
                (
                    "provider",
                    models.CharField(
                        choices=[
                            ("embedded", "Embedded (in-process, no key)"),
                            ("openai", "OpenAI-compatible HTTP API"),
                            ("scripted", "Scripted (fake, for tests and demos)"),
                        ],
                        default="embedded",
                        max_length=32,
                    ),
                ),
                (
                    "model",
                    models.CharField(
                        blank=True, help_text="Model name sent to the provider.", max_length=200
                    ),
                ),
                (
                    "base_url",
                    models.URLField(
                        blank=True,
                        help_text="Endpoint of an OpenAI-compatible server.",
                        max_length=500,
                    ),
                ),
                (
                    "api_key_env",
                    models.CharField(
                        blank=True,
                        help_text=(
                            "Name of the environment variable that holds the "
                            "API key (not the key). Blank: OPENAI_API_KEY for "
                            "OpenAI itself, no key for a server at a base URL."
                        ),
                        max_length=100,
                        validators=[
                            django.core.validators.RegexValidator(
                                "^[A-Za-z_][A-Za-z0-9_]*$",
                                (
                                    "Enter the NAME of an environment variable (for "
                                    "example OPENAI_API_KEY), never the key."
                                ),
                            )
                        ],
                        verbose_name="API key variable",
                    ),
                ),
                (
                    "timeout",
                    models.FloatField(
                        default=60.0,
                        help_text="Seconds to wait for the provider before giving up.",
                        validators=[django.core.validators.MinValueValidator(0.1)],
                    ),
                ),
                (
                    "max_retries",
                    models.PositiveSmallIntegerField(
                        default=2,
                        help_text="Retries of a failed provider request (timeouts, 429, 5xx).",
                    ),
                ),
                (
                    "settings",
                    models.JSONField(
                        blank=True,
                        default=dict,
                        help_text=(
                            "Other provider settings as a JSON object, e.g. "
                            'scripted: {"responses": ["Hi!"], "repeat": true}; '
                            'openai: {"include_usage": true}.'
                        ),
                    ),
                ),
                ("updated_at", models.DateTimeField(auto_now=True)),
                (
                    "dimensions",
                    models.PositiveIntegerField(
                        default=384,
                        help_text="Length of the vectors the model returns (MiniLM: 384).",
                    ),
                ),
            ],
            options={
                "verbose_name": "embedding model",
                "ordering": ["slug"],
                "abstract": False,
            },
        ),
        migrations.CreateModel(
            name="PromptTemplate",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                (
                    "slug",
                    models.SlugField(help_text="Key chains refer to.", max_length=100, unique=True),
                ),
                ("name", models.CharField(blank=True, max_length=200)),
                (
                    "text",
                    models.TextField(
                        help_text="Placeholders are {name}; write {{ and }} for braces."
                    ),
                ),
                (
                    "placeholders",
                    django.contrib.postgres.fields.ArrayField(
                        base_field=models.CharField(max_length=100),
                        blank=True,
                        default=list,
                        help_text="The {name} fields the text uses, comma-separated.",
                        size=None,
                    ),
                ),
                ("updated_at", models.DateTimeField(auto_now=True)),
            ],
            options={
                "verbose_name": "prompt template",
                "ordering": ["slug"],
            },
        ),
        migrations.CreateModel(
            name="SensitiveWordList",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                (
                    "slug",
                    models.SlugField(
                        help_text="Key advisors refer to.", max_length=100, unique=True
                    ),
                ),
                ("name", models.CharField(blank=True, max_length=200)),
                (
                    "words",
                    django.contrib.postgres.fields.ArrayField(
                        base_field=models.CharField(max_length=200),
                        blank=True,
                        default=list,
                        size=None,
                    ),
                ),
                ("updated_at", models.DateTimeField(auto_now=True)),
            ],
            options={
                "verbose_name": "sensitive-word list",
                "ordering": ["slug"],
            },
        ),
        migrations.CreateModel(
            name="AdvisorConfig",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                (
                    "advisor_type",
                    models.CharField(help_text="A registered advisor type.", max_length=100),
                ),
                (
                    "order",
                    models.IntegerField(
                        blank=True,
                        help_text=(
                            "Smaller runs first (outer). Blank: the type's "
                            "default. Accepts HIGHEST+N and LOWEST-N."
                        ),
                        null=True,
                        validators=[
                            django.core.validators.MinValueValidator(-2147483648),
                            django.core.validators.MaxValueValidator(2147483647),
                        ],
                    ),
                ),
                ("enabled", models.BooleanField(default=True)),
                ("params", models.JSONField(blank=True, default=dict)),
                (
                    "chain",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="advisors",
                        to="advisors_app.advisorchain",
                    ),
                ),
            ],
            options={
                "verbose_name": "advisor",
                "ordering": ["chain", "id"],
            },
        ),
        migrations.CreateModel(
            name="CallLog",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("chain_slug", models.SlugField(max_length=100)),
                ("config_hash", models.CharField(blank=True, max_length=64)),
                ("conversation_id", models.CharField(blank=True, db_index=True, max_length=255)),
                ("trace_id", models.CharField(max_length=32, unique=True)),
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
                            ("ok", "Completed"),
                            ("error", "Failed"),
                            ("cancelled", "Cancelled"),
                        ],
                        max_length=16,
                    ),
                ),
                (
                    "latency",
                    models.FloatField(help_text="Seconds from the start of the chain to its end."),
                ),
                (
                    "time_to_first_token",
                    models.FloatField(
                        blank=True,
                        help_text="Seconds to the first streamed text (streams only).",
                        null=True,
                    ),
                ),
                ("usage", models.JSONField(blank=True, default=dict)),
                ("finish_reason", models.CharField(blank=True, max_length=64)),
                ("error_type", models.CharField(blank=True, max_length=200)),
                ("error_message", models.TextField(blank=True)),
                ("provider_status", models.PositiveSmallIntegerField(blank=True, null=True)),
                ("trace", models.JSONField(blank=True, default=list)),
                ("created", models.DateTimeField(auto_now_add=True, db_index=True)),
                (
                    "chain",
                    models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="call_logs",
                        to="advisors_app.advisorchain",
                    ),
                ),
                (
                    "user",
                    models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="advisor_call_logs",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
            ],
            options={
                "verbose_name": "call log",
                "ordering": ["-created"],
            },
        ),
        migrations.AddField(
            model_name="advisorchain",
            name="chat_model",
            field=models.ForeignKey(
                blank=True,
                help_text="Blank: the model configuration named by ADVISORS['DEFAULT_CHAT_MODEL'].",
                null=True,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="chains",
                to="advisors_app.chatmodelconfig",
            ),
        ),
        migrations.AddField(
            model_name="advisorchain",
            name="system_template",
            field=models.ForeignKey(
                blank=True,
                help_text=(
                    "A stored template instead of the system text; its "
                    "placeholders are filled from the request's "
                    'params["system_params"].'
                ),
                null=True,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="chains",
                to="advisors_app.prompttemplate",
            ),
        ),
    ]
