"""The weft-django example project.

The Celery app (``project/celery.py``) is exposed as ``project.celery_app``
but imported lazily: importing this package (settings, ``manage.py``, the
test suite, a standalone ``weft_worker``) neither imports Celery nor marks
the process as a Celery-transport one. ``celery -A project worker`` finds
``project.celery`` by itself; the web entry point (``project/wsgi.py``)
imports it when ``CELERY_BROKER_URL`` is set. A project of your own usually
imports its ``celery.py`` eagerly here (the standard Django recipe): that is
safe too, since ``install(app)`` starts nothing outside a worker.
"""

from __future__ import annotations

from typing import Any


def __getattr__(name: str) -> Any:
    if name == "celery_app":
        from project.celery import app

        return app
    raise AttributeError(f"module 'project' has no attribute {name!r}")
