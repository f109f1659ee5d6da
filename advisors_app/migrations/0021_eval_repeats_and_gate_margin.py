"""Evaluation runs pin their chat options and repeat items; the gate decides on an interval
(issue 40, "A gate that does not flip").

``EvalRun.chat_options`` and ``repeats``; ``EvalResult.repeat`` (one result per item and
repeat); ``PromotionGate.margin`` (the non-inferiority margin) and ``max_regressions`` made
optional. A gate left at the old default of ``max_regressions`` 0 (no item may regress — the
point count that flipped at random) is set to null: it decides on the interval now. Earlier
runs keep ``chat_options`` ``{}``: nothing was pinned on them.
"""

import django.core.validators
from django.db import migrations, models


def _count_regressions_no_more(apps, schema_editor):
    PromotionGate = apps.get_model("advisors_app", "PromotionGate")
    PromotionGate.objects.filter(max_regressions=0).update(max_regressions=None)


class Migration(migrations.Migration):
    dependencies = [
        ("advisors_app", "0020_document_metadata_index"),
    ]

    operations = [
        migrations.AddField(
            model_name="evalrun",
            name="chat_options",
            field=models.JSONField(blank=True, default=dict),
        ),
        migrations.AddField(
            model_name="evalrun",
            name="repeats",
            field=models.PositiveSmallIntegerField(
                default=1,
                validators=[
                    django.core.validators.MinValueValidator(1),
                    django.core.validators.MaxValueValidator(20),
                ],
            ),
        ),
        migrations.AddConstraint(
            model_name="evalrun",
            constraint=models.CheckConstraint(
                condition=models.Q(("repeats__gte", 1), ("repeats__lte", 20)),
                name="advisors_evalrun_repeats_range",
            ),
        ),
        migrations.AddField(
            model_name="evalresult",
            name="repeat",
            field=models.PositiveSmallIntegerField(default=0),
        ),
        migrations.AlterModelOptions(
            name="evalresult",
            options={"ordering": ["run", "item_key", "repeat"]},
        ),
        migrations.RemoveConstraint(
            model_name="evalresult",
            name="advisors_evalresult_once",
        ),
        migrations.AddConstraint(
            model_name="evalresult",
            constraint=models.UniqueConstraint(
                fields=("run", "item_key", "repeat"), name="advisors_evalresult_once_per_repeat"
            ),
        ),
        migrations.AddField(
            model_name="promotiongate",
            name="margin",
            field=models.FloatField(
                default=0.05,
                help_text="Non-inferiority margin: fails when the 95% interval's lower bound of "
                "a score key's mean difference (candidate − baseline) is below −margin.",
                validators=[
                    django.core.validators.MinValueValidator(0.0),
                    django.core.validators.MaxValueValidator(1.0),
                ],
            ),
        ),
        migrations.AlterField(
            model_name="promotiongate",
            name="max_regressions",
            field=models.PositiveIntegerField(
                blank=True,
                help_text="Items that may regress (blank: not counted — single items flip by "
                "chance).",
                null=True,
            ),
        ),
        migrations.RunPython(_count_regressions_no_more, migrations.RunPython.noop),
    ]
