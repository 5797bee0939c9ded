"""App config: label ``weft``; imports checks and discovers ``workflows.py``.

``ready()`` never touches the database (SPEC §3): the gates of §4.3 run in
``Engine.boot()``.
"""

from __future__ import annotations

from django.apps import AppConfig


class WeftConfig(AppConfig):
    name = "weft_django"
    label = "weft"
    verbose_name = "weft workflows"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from weft_django import checks  # noqa: F401  (registers the system checks)

        from weft_django.engine.definitions import autodiscover

        autodiscover()
