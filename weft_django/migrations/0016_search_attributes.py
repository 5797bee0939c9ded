import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('weft', '0015_run_trace_context'),
    ]

    operations = [
        migrations.CreateModel(
            name='RunSearchAttribute',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('name', models.CharField(max_length=64)),
                ('type', models.CharField(max_length=8)),
                ('str_value', models.CharField(blank=True, max_length=255, null=True)),
                ('int_value', models.BigIntegerField(blank=True, null=True)),
                ('float_value', models.FloatField(blank=True, null=True)),
                ('bool_value', models.BooleanField(blank=True, null=True)),
                ('datetime_value', models.DateTimeField(blank=True, null=True)),
                ('position', models.IntegerField(help_text='journal position of the upsert that wrote it')),
                ('set_at', models.BigIntegerField(default=0, help_text='engine clock, ms')),
            ],
            options={
                'ordering': ['run', 'name'],
            },
        ),
        migrations.AddIndex(
            model_name='workflowrun',
            index=models.Index(fields=['created_at'], name='weft_run_created_idx'),
        ),
        migrations.AddIndex(
            model_name='workflowrun',
            index=models.Index(fields=['finished_at'], name='weft_run_finished_idx'),
        ),
        migrations.AddIndex(
            model_name='workflowrun',
            index=models.Index(fields=['name', 'created_at'], name='weft_run_name_created_idx'),
        ),
        migrations.AddField(
            model_name='runsearchattribute',
            name='run',
            field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='search_attributes', to='weft.workflowrun'),
        ),
        migrations.AddIndex(
            model_name='runsearchattribute',
            index=models.Index(fields=['name', 'str_value'], name='weft_attr_str_idx'),
        ),
        migrations.AddIndex(
            model_name='runsearchattribute',
            index=models.Index(fields=['name', 'int_value'], name='weft_attr_int_idx'),
        ),
        migrations.AddIndex(
            model_name='runsearchattribute',
            index=models.Index(fields=['name', 'float_value'], name='weft_attr_float_idx'),
        ),
        migrations.AddIndex(
            model_name='runsearchattribute',
            index=models.Index(fields=['name', 'bool_value'], name='weft_attr_bool_idx'),
        ),
        migrations.AddIndex(
            model_name='runsearchattribute',
            index=models.Index(fields=['name', 'datetime_value'], name='weft_attr_datetime_idx'),
        ),
        migrations.AddConstraint(
            model_name='runsearchattribute',
            constraint=models.UniqueConstraint(fields=('run', 'name'), name='weft_attr_run_name'),
        ),
    ]
