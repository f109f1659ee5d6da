from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("advisors_app", "0025_guard_verdicts")]

    operations = [
        migrations.AddField(
            model_name="conversation",
            name="listed",
            field=models.BooleanField(
                default=True,
                help_text="Listed in its owner's chat sidebar and GET /api/conversations/. Off "
                "for the conversations of the admin playground, its comparisons and evaluation "
                "runs: a staff member's tests are not their chats (still opened by id).",
            ),
        ),
    ]
