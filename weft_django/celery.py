"""``weft_django.celery.install(app)``: run weft engines inside Celery workers.

In the project's ``celery.py``::

    app = Celery("proj")
    app.config_from_object("django.conf:settings", namespace="CELERY")
    from weft_django.celery import install
    install(app)

Importing this module (or calling ``install``) in a web process, ``migrate``
or ``shell`` starts nothing; see ``weft_django.transports.celery``.
"""

from __future__ import annotations

import importlib.util

from django.core.exceptions import ImproperlyConfigured

if importlib.util.find_spec("celery") is None:  # pragma: no cover - depends on the install
    raise ImproperlyConfigured('weft_django.celery needs Celery: pip install "weft-django[celery]"')

from weft_django.transports.celery import (
    DEFAULT_QUEUE,
    DRIVE_TASK,
    PICKUP_TASK,
    ROUTED_TASK,
    CeleryWakeBackend,
    WeftNodeStep,
    install,
    install_routing,
    uninstall,
    uninstall_routing,
)

__all__ = [
    "DEFAULT_QUEUE",
    "DRIVE_TASK",
    "PICKUP_TASK",
    "ROUTED_TASK",
    "CeleryWakeBackend",
    "WeftNodeStep",
    "install",
    "install_routing",
    "uninstall",
    "uninstall_routing",
]
