"""Settings of the django-tasks-db peer: ``DATABASE_URL`` (PostgreSQL) and nothing else."""

from __future__ import annotations

import os
from urllib.parse import urlsplit

_url = urlsplit(os.environ["DATABASE_URL"])
SECRET_KEY = "bench-not-secret"
DEBUG = False
USE_TZ = True
INSTALLED_APPS = ["django_tasks", "django_tasks_db", "benchmarks.tasksdb_peer"]
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": _url.path.lstrip("/"),
        "USER": _url.username or "postgres",
        "PASSWORD": _url.password or "",
        "HOST": _url.hostname or "127.0.0.1",
        "PORT": _url.port or 5432,
    }
}
TASKS = {"default": {"BACKEND": "django_tasks_db.DatabaseBackend"}}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
LOGGING = {"version": 1, "disable_existing_loggers": False, "root": {"level": "WARNING"}}
