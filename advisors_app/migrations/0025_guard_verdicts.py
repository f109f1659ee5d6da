"""Guard verdicts on the call log (issue 38): each turn's verdicts, in order."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("advisors_app", "0024_turn_pending")]

    operations = [
        migrations.AddField(
            model_name="calllog",
            name="guard_verdicts",
            field=models.JSONField(blank=True, default=list),
        ),
    ]
