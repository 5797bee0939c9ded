"""App config: label ``weft``; the composition root of the app.

``ready()`` imports the checks, discovers ``workflows.py``, installs the wake
backends of ``WEFT["WAKE_BACKENDS"]`` (``engine.wakes``: the runtime names no
transport, this is where one is chosen) and may register the Prometheus
collector. It never touches the database (SPEC §3): the gates of §4.3 run in
``Engine.boot()``, a backend's ``available()`` is asked only when a wake is
announced, and the collector queries only at scrape time.
"""

from __future__ import annotations

from typing import Any

from django.apps import AppConfig
from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import import_string

DEFAULT_WAKE_BACKENDS: tuple[str, ...] = ("weft_django.transports.notify.NotifyBackend",)


class WeftConfig(AppConfig):
    name = "weft_django"
    label = "weft"
    verbose_name = "weft workflows"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from weft_django import checks  # noqa: F401  (registers the system checks)
        from weft_django.engine import schedules  # noqa: F401  (registers weft.schedule)
        from weft_django.engine.workflow.definitions import autodiscover

        autodiscover()
        install_wake_backends()
        from weft_django import tasks  # Django tasks: late registration, weft.E060/E061

        tasks.install()
        self._register_metrics_collector()

    @staticmethod
    def _register_metrics_collector() -> None:
        """Register the cluster collector with prometheus_client's default registry.

        Only with the ``metrics`` extra installed and the project opted in
        (``WEFT["PROMETHEUS_COLLECTOR"]``, default: ``django_prometheus`` is
        installed), so a project without Prometheus imports nothing of it.
        Idempotent: ``ready()`` may run more than once in tests.
        """
        try:
            from weft_django.contrib import prometheus as metrics_export
        except ImportError:
            return
        if metrics_export.settings_opt_in():
            metrics_export.register()


def install_wake_backends(paths: Any = None) -> None:
    """Instantiate and install each backend of ``paths`` (default: the setting).

    Idempotent (``WakeBackends.install`` keeps one instance per class), so a
    second ``ready()`` changes nothing. A path that does not import, or does
    not name a ``WakeBackend`` class, is ``ImproperlyConfigured`` naming it.
    """
    from weft_django.conf import get_settings
    from weft_django.engine.wakes import WakeBackend, backends

    if paths is None:
        try:
            settings = get_settings()
        except ImproperlyConfigured:  # the system checks name the bad keys
            paths = DEFAULT_WAKE_BACKENDS
        else:
            paths = getattr(settings, "wake_backends", DEFAULT_WAKE_BACKENDS)
    if isinstance(paths, str) or not isinstance(paths, list | tuple):
        raise ImproperlyConfigured(
            f'WEFT["WAKE_BACKENDS"] must be a list of dotted paths, got {paths!r}'
        )
    for path in paths:
        try:
            backend_class = import_string(path) if isinstance(path, str) else None
        except ImportError as exc:
            raise ImproperlyConfigured(
                f'WEFT["WAKE_BACKENDS"]: cannot import {path!r} ({exc})'
            ) from exc
        if not (isinstance(backend_class, type) and issubclass(backend_class, WakeBackend)):
            raise ImproperlyConfigured(
                f'WEFT["WAKE_BACKENDS"]: {path!r} is not a WakeBackend class'
            )
        backends.install(backend_class())
