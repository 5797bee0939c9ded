"""Fair queues: a run's fairness key and weight, and the key of each slot; the
``terminated`` status (``on_conflict="terminate-existing"``); the queues an
engine serves (``weft_worker --queues``)."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("weft", "0017_scale_indexes")]

    operations = [
        migrations.AddField(
            model_name="enginerecord",
            name="queues",
            field=models.JSONField(blank=True, null=True),
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
        migrations.AddField(
            model_name="workflowrun",
            name="fairness_key",
            field=models.CharField(blank=True, max_length=200, null=True),
        ),
        migrations.AddField(
            model_name="workflowrun",
            name="fairness_weight",
            field=models.IntegerField(default=1),
        ),
        migrations.AddField(
            model_name="queueslot",
            name="fairness_key",
            field=models.CharField(blank=True, max_length=200, null=True),
        ),
    ]
