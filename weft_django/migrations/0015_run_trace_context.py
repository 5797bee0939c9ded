from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('weft', '0014_metric_totals'),
    ]

    operations = [
        migrations.AddField(
            model_name='workflowrun',
            name='trace_context',
            field=models.JSONField(blank=True, null=True),
        ),
    ]
