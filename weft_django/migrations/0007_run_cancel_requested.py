from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("weft", "0006_engine_presence_key"),
    ]

    operations = [
        migrations.AddField(
            model_name="workflowrun",
            name="cancel_requested_at",
            field=models.DateTimeField(blank=True, db_index=True, null=True),
        ),
        migrations.AddField(
            model_name="workflowrun",
            name="cancel_reason",
            field=models.TextField(blank=True, default=""),
        ),
        migrations.AddField(
            model_name="workflowrun",
            name="cancel_deadline_at",
            field=models.BigIntegerField(
                blank=True, help_text="end of the cancel grace, ms", null=True
            ),
        ),
    ]
