"""Crash-loop containment: a run's engine-death count, and the attempt-started timer kind."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("weft", "0017_scale_indexes")]

    operations = [
        migrations.AddField(
            model_name="workflowrun",
            name="recoveries",
            field=models.JSONField(blank=True, null=True),
        ),
        migrations.AlterField(
            model_name="timer",
            name="kind",
            field=models.CharField(
                choices=[
                    ("sleep", "sleep"),
                    ("timeout", "timeout"),
                    ("retry", "retry"),
                    ("attempt", "attempt"),
                ],
                max_length=32,
            ),
        ),
    ]
