"""WSGI entry point of the example project."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
if os.environ.get("CELERY_BROKER_URL"):
    # A Celery deployment: client calls enqueue their wakes on commit.
    import project.celery  # noqa: F401

application = get_wsgi_application()
