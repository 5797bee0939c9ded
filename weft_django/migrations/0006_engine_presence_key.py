from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("weft", "0005_signal_unconsumed_index"),
    ]

    operations = [
        migrations.AddField(
            model_name="enginerecord",
            name="presence_key",
            field=models.IntegerField(blank=True, null=True),
        ),
    ]
