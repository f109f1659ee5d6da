from __future__ import annotations

import pgvector.django.vector
from django.db import migrations, models


class Migration(migrations.Migration):
    initial = True

    # The vector type exists only after the app's extension migration.
    dependencies = [("advisors_app", "0001_vector_extension")]

    operations = [
        migrations.CreateModel(
            name="Item",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("name", models.CharField(max_length=50)),
                ("embedding", pgvector.django.vector.VectorField(dimensions=3)),
            ],
        ),
    ]
