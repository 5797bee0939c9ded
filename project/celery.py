"""The example project's Celery app: ``celery -A project worker``.

Each worker node boot is one weft engine (``weft_django.celery.install``).
Importing this module starts nothing: a web process that imports it only
marks itself as a Celery-transport process, so ``client`` calls enqueue
their wakes once they commit. The broker comes from ``CELERY_BROKER_URL``
(default: Redis on localhost); other ``CELERY_*`` Django settings apply.
"""

from __future__ import annotations

import os

from celery import Celery

from weft_django.celery import install

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")

app = Celery("project", broker=os.environ.get("CELERY_BROKER_URL", "redis://127.0.0.1:6379/0"))
app.config_from_object("django.conf:settings", namespace="CELERY")
app.conf.broker_connection_retry_on_startup = True
install(app)

__all__ = ["app"]
