"""Django app configuration: registers the system checks and the ``conversation_search`` tool
(:mod:`advisors_app.memory.recall`) when the app registry is ready, and redacts secrets from every
log record of the process and from chat models' replies
(:mod:`advisors_app.security.redaction`); in a task worker, it recovers the ingestion jobs of
dead workers as the worker starts (:mod:`advisors_app.ingestion.recovery`), and the turns of
dead processes (:mod:`advisors_app.turn.recovery`); with ``ADVISORS["OPENTELEMETRY"]`` set it
exports every turn's spans (:mod:`advisors_app.telemetry`)."""

from __future__ import annotations

from django.apps import AppConfig
from django.core import checks


class AdvisorsAppConfig(AppConfig):
    name = "advisors_app"
    verbose_name = "Advisors"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from advisors_app.checks import (
            check_chains,
            check_databases,
            check_model_configs,
            check_project,
            check_settings,
            check_tasks,
        )
        from advisors_app.conf import app_settings
        from advisors_app.core.providers.echoed_secrets import set_known_secrets
        from advisors_app.core.providers.key_envs import set_allowed_key_envs
        from advisors_app.definition import advisor_types
        from advisors_app.definition.snapshot import register_reference_kinds
        from advisors_app.experiments import guardrails
        from advisors_app.experiments import serving as experiments
        from advisors_app.ingestion import recovery
        from advisors_app.memory import recall
        from advisors_app.online import sampling as online
        from advisors_app.security import protection, redaction
        from advisors_app.turn import recovery as turn_recovery
        from advisors_app.turn import stages

        # Tagged "database" so `check --database default` and `migrate` run them, and
        # plain `check` (which must not need a live server) does not.
        checks.register(check_databases, checks.Tags.database)
        checks.register(check_chains, checks.Tags.database)
        checks.register(check_settings)
        checks.register(check_project)
        checks.register(check_tasks)
        checks.register(check_model_configs)
        advisor_types.register_builtins()
        register_reference_kinds()
        recall.register_recall_tools()
        protection.connect()
        redaction.connect()
        redaction.install_log_redaction()
        # A provider echoing a key in a successful reply: redacted before anyone sees it.
        set_known_secrets(redaction.secret_values)
        # Which variables a model config may send as its key: ADVISORS["PROVIDER_KEY_ENVS"],
        # read at each check so overridden settings apply at once.
        set_allowed_key_envs(lambda: app_settings.PROVIDER_KEY_ENVS)
        recovery.connect()
        # The experiments' turn hooks: the arm a turn runs (assign), and counting the turns
        # that schedule guardrail checks (after commit).
        stages.add_hook(stages.Stage.ASSIGN, experiments.assign)
        stages.add_hook(stages.Stage.AFTER_COMMIT, guardrails.count_turn)
        # Online evaluation: a sample of the committed turns queued for the rules' evaluators.
        stages.add_hook(stages.Stage.AFTER_COMMIT, online.sample_turn)
        turn_recovery.connect()
        # OpenTelemetry export: imported (with its SDK) only when the setting is on.
        if app_settings.OPENTELEMETRY:
            from advisors_app.telemetry import export as telemetry

            if telemetry.connect():
                stages.add_hook(stages.Stage.AFTER_COMMIT, telemetry.export_turn)
