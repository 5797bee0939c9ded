"""A plain Celery app for the routed-activity tests: not a weft node.

It only registers ``weft.run_routed_activity`` (``install_routing``), so a
worker of it (``celery -A tests.celery.routed_app worker -Q gpu``) runs
routed activities and nothing else: no engine, no claim. Django is set up
first because the routing task reads and writes weft's tables.
"""

from __future__ import annotations

import os

import django
from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
django.setup()

from weft_django.celery import install_routing  # noqa: E402

app = Celery("weft-routed", broker=os.environ.get("CELERY_BROKER_URL", "redis://127.0.0.1:6379/0"))
app.conf.broker_connection_retry_on_startup = True
install_routing(app)

__all__ = ["app"]
