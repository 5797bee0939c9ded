"""Run repair: a run's engine-death count, the attempt-started timer kind, the
``terminated`` run status (reset)."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("weft", "0018_flow_control")]

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
        migrations.AlterField(
            model_name="workflowrun",
            name="status",
            field=models.CharField(
                choices=[
                    ("pending", "pending"),
                    ("running", "running"),
                    ("parked", "parked"),
                    ("suspended", "suspended"),
                    ("completed", "completed"),
                    ("failed", "failed"),
                    ("cancelled", "cancelled"),
                    ("timed_out", "timed_out"),
                    ("terminated", "terminated"),
                ],
                db_index=True,
                default="pending",
                max_length=16,
            ),
        ),
    ]
