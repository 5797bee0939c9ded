"""The demo app: workflows used by ``weft_demo`` and by the tests."""

from django.apps import AppConfig


class DemoConfig(AppConfig):
    name = "project.demo"
    label = "demo"
    default_auto_field = "django.db.models.BigAutoField"
