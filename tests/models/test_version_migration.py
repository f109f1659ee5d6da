"""The data migration that gives every chain stored before versions existed its version 1."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from advisors_app.definition import resolve_draft, snapshot_hash
from advisors_app.models import AdvisorChain

BEFORE = [("advisors_app", "0007_json_values_are_storable")]
AFTER = [("advisors_app", "0009_publish_existing_chains")]


@pytest.mark.django_db(transaction=True)
def test_existing_chains_get_version_1_labelled_production() -> None:
    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)
    try:
        old = executor.loader.project_state(BEFORE).apps
        model = old.get_model("advisors_app", "ChatModelConfig").objects.create(
            slug="m", provider="scripted", settings={"responses": ["Hi"]}
        )
        chain = old.get_model("advisors_app", "AdvisorChain").objects.create(
            slug="legacy", name="Legacy", chat_model=model, system_prompt="Be brief."
        )
        old.get_model("advisors_app", "AdvisorConfig").objects.create(
            chain=chain, advisor_type="append", params={"text": "!"}
        )
        executor = MigrationExecutor(connection)
        executor.loader.build_graph()
        executor.migrate(AFTER)
        # Read with today's models, so after the later migrations too (their columns exist).
        executor = MigrationExecutor(connection)
        executor.loader.build_graph()
        executor.migrate(executor.loader.graph.leaf_nodes())
        migrated = AdvisorChain.objects.get(slug="legacy")
        [version] = migrated.versions.all()
        assert version.number == 1
        assert version.snapshot_hash == snapshot_hash(resolve_draft(migrated))
        assert version.snapshot["system_prompt"] == "Be brief."
        assert [label.name for label in version.labels.all()] == ["production"]
        [event] = version.labels.get().events.all()
        assert event.from_version is None and event.to_version == version
    finally:
        executor = MigrationExecutor(connection)
        executor.loader.build_graph()
        executor.migrate(executor.loader.graph.leaf_nodes())
