"""Fair queues: a run's fairness key and weight, and the key of each slot."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("weft", "0017_scale_indexes")]

    operations = [
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
