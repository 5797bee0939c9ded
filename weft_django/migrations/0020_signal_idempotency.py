"""Signal idempotency: a signal sent with ``idempotency_key`` is recorded once
per key per workflow id (``client.signal(..., idempotency_key=)``)."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("weft", "0019_run_repair")]

    operations = [
        migrations.AddField(
            model_name="signalmessage",
            name="idempotency_key",
            field=models.CharField(blank=True, max_length=255, null=True),
        ),
        migrations.AddField(
            model_name="signalmessage",
            name="workflow_id",
            field=models.CharField(blank=True, max_length=200, null=True),
        ),
        migrations.AddConstraint(
            model_name="signalmessage",
            constraint=models.UniqueConstraint(
                condition=models.Q(("idempotency_key__isnull", False)),
                fields=("workflow_id", "idempotency_key"),
                name="weft_signal_idempotency",
            ),
        ),
    ]
