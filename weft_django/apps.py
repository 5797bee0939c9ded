"""App config: label ``weft``; imports checks and discovers ``workflows.py``.

``ready()`` never touches the database (SPEC §3): the gates of §4.3 run in
``Engine.boot()``, and the Prometheus collector it may register queries only
at scrape time.
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
        self._register_metrics_collector()

    @staticmethod
    def _register_metrics_collector() -> None:
        """Register the cluster collector with prometheus_client's default registry.

        Only with the ``metrics`` extra installed and the project opted in
        (``WEFT_PROMETHEUS_COLLECTOR``, default: ``django_prometheus`` is
        installed), so a project without Prometheus imports nothing of it.
        Idempotent: ``ready()`` may run more than once in tests.
        """
        try:
            from weft_django import metrics_export
        except ImportError:
            return
        if metrics_export.settings_opt_in():
            metrics_export.register()
