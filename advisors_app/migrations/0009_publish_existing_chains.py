"""Every existing chain gets version 1 from its current rows, labelled ``production``.

The snapshot is what the chain served until now, so it is stored even when today's lint finds
errors in it (``manage.py check --database default`` lists them). Uses the app's own snapshot
code: a snapshot must be resolved exactly as the runtime resolves it.
"""

from contextlib import contextmanager

from django.apps import apps as live_apps
from django.db import migrations


@contextmanager
def _columns_of_later_migrations(schema_editor):
    """The app's own code reads the models as they are today, which may have columns that
    later migrations add: add those (nullable, in this migration's transaction) while it runs
    and drop them again, so a database migrated from before 0009 in one go gets its versions."""
    connection = schema_editor.connection
    added = []
    with connection.cursor() as cursor:
        tables = set(connection.introspection.table_names(cursor))
        for model in live_apps.get_app_config("advisors_app").get_models():
            table = model._meta.db_table
            if table not in tables:
                continue
            columns = {
                c.name for c in connection.introspection.get_table_description(cursor, table)
            }
            for field in model._meta.local_concrete_fields:
                # A key to a table a later migration creates cannot be added yet (the
                # publishing below reads no such column).
                related = field.related_model
                if related is not None and related._meta.db_table not in tables:
                    continue
                if field.column not in columns:
                    added.append((model, field))
    for model, field in added:
        schema_editor.add_field(model, field)
    try:
        yield
    finally:
        for model, field in reversed(added):
            schema_editor.remove_field(model, field)


def publish_existing(apps, schema_editor):
    with _columns_of_later_migrations(schema_editor):
        _publish(apps, schema_editor)


def _publish(apps, schema_editor):
    from advisors_app.definition.snapshot import references_of, resolve_draft, snapshot_hash
    from advisors_app.models import AdvisorChain

    ChainVersion = apps.get_model("advisors_app", "ChainVersion")
    ChainLabel = apps.get_model("advisors_app", "ChainLabel")
    ChainLabelEvent = apps.get_model("advisors_app", "ChainLabelEvent")
    for chain in AdvisorChain.objects.using(schema_editor.connection.alias).order_by("pk"):
        if ChainVersion.objects.filter(chain_id=chain.pk).exists():
            continue
        snapshot = resolve_draft(chain)
        version = ChainVersion.objects.create(
            chain_id=chain.pk,
            number=1,
            snapshot=snapshot,
            snapshot_hash=snapshot_hash(snapshot),
            references=references_of(snapshot),
            message="The chain as it was before versions existed.",
        )
        label = ChainLabel.objects.create(chain_id=chain.pk, name="production", version=version)
        ChainLabelEvent.objects.create(label=label, to_version=version, reason="first version")


class Migration(migrations.Migration):
    dependencies = [("advisors_app", "0008_chain_versions")]

    operations = [migrations.RunPython(publish_existing, migrations.RunPython.noop)]
