"""Every existing chain gets version 1 from its current rows, labelled ``production``.

The snapshot is what the chain served until now, so it is stored even when today's lint finds
errors in it (``manage.py check --database default`` lists them). Uses the app's own snapshot
code: a snapshot must be resolved exactly as the runtime resolves it.
"""

from django.db import migrations


def publish_existing(apps, schema_editor):
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
