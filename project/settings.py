"""Settings of the weft-django example project.

``DATABASE_URL`` selects the database (default: a SQLite file beside this
project, the embedded default). ``WEFT_TEST_TIMINGS=1`` shortens the claim
timings for the process tests (TTL 3 s, renew 1 s: SPEC §8); ``WEFT_OWNERSHIP``
sets ``WEFT["OWNERSHIP"]``.
"""

from __future__ import annotations

import os
from pathlib import Path

from project.dburl import parse_database_url

BASE_DIR = Path(__file__).resolve().parent.parent

SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "weft-example-not-secret")
DEBUG = os.environ.get("DJANGO_DEBUG", "1") == "1"
ALLOWED_HOSTS = ["*"]

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",  # Swagger UI's files, served locally (no CDN)
    "django_prometheus",
    "weft_django",
    "project.demo",
]

MIDDLEWARE = [
    "django_prometheus.middleware.PrometheusBeforeMiddleware",
    "django.middleware.security.SecurityMiddleware",
    # Static files (the admin's, Swagger UI's) from the WSGI app itself, so the
    # example serves them under gunicorn with DEBUG off (docs/how-to/deploy.md).
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django_prometheus.middleware.PrometheusAfterMiddleware",
]

REST_FRAMEWORK = {
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.SessionAuthentication",
        "rest_framework.authentication.BasicAuthentication",
    ],
}
SPECTACULAR_SETTINGS = {
    "TITLE": "weft-django API",
    "VERSION": "0.1.0",
    # /api/docs/ works without internet: Swagger UI from drf-spectacular-sidecar.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
}

ROOT_URLCONF = "project.urls"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ]
        },
    }
]

WSGI_APPLICATION = "project.wsgi.application"

DATABASES = {
    "default": parse_database_url(
        os.environ.get("DATABASE_URL", "sqlite:///weft.sqlite3"), BASE_DIR
    )
}

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
USE_TZ = True
TIME_ZONE = "UTC"
STATIC_URL = "static/"
# WhiteNoise serves the admin's and Swagger UI's files from the WSGI app. The
# example finds them in the apps' own directories, so ``gunicorn project.wsgi``
# needs no build step; a deployment runs ``manage.py collectstatic`` into
# STATIC_ROOT and drops WHITENOISE_USE_FINDERS (docs/howto/deployment.md).
STATIC_ROOT = Path(os.environ.get("DJANGO_STATIC_ROOT", BASE_DIR / "staticfiles"))
WHITENOISE_USE_FINDERS = os.environ.get("WEFT_STATIC_FINDERS", "1") == "1"

WEFT: dict[str, object] = {}
if os.environ.get("WEFT_TEST_TIMINGS") == "1":
    WEFT.update(
        {"CLAIM_TTL": 3, "CLAIM_RENEW_INTERVAL": 1, "LEASE_TTL": 3, "LEASE_RENEW_INTERVAL": 1}
    )
if os.environ.get("WEFT_OWNERSHIP"):
    # One engine of another mode against the same store (the start-up gates' test).
    WEFT["OWNERSHIP"] = os.environ["WEFT_OWNERSHIP"]
if os.environ.get("WEFT_SESSION_PRESENCE"):
    # "0": crash detection by the claim TTL alone (the TTL-path process tests).
    WEFT["SESSION_PRESENCE"] = os.environ["WEFT_SESSION_PRESENCE"] == "1"
# Single timings from the environment, in seconds (the Celery tests: a 60 s
# polling backstop, a 2 s eta horizon; the many-engines benchmark: a slower
# poll): WEFT_CLAIM_TTL, WEFT_CLAIM_RENEW_INTERVAL, WEFT_CELERY_ETA_HORIZON,
# WEFT_POLL_INTERVAL.
for _key in ("CLAIM_TTL", "CLAIM_RENEW_INTERVAL", "CELERY_ETA_HORIZON", "POLL_INTERVAL"):
    if os.environ.get(f"WEFT_{_key}"):
        WEFT[_key] = float(os.environ[f"WEFT_{_key}"])
# Flow-control queues as JSON (the queue process tests, the queues benchmark).
if os.environ.get("WEFT_QUEUES"):
    import json

    WEFT["QUEUES"] = json.loads(os.environ["WEFT_QUEUES"])
# The failed-turn bound from the environment (the Celery turn-failure test).
if os.environ.get("WEFT_TURN_MAX_FAILURES"):
    WEFT["TURN_MAX_FAILURES"] = int(os.environ["WEFT_TURN_MAX_FAILURES"])
# The crash-loop bound from the environment (the crash-loop process test).
if os.environ.get("WEFT_MAX_RECOVERY_ATTEMPTS"):
    WEFT["MAX_RECOVERY_ATTEMPTS"] = int(os.environ["WEFT_MAX_RECOVERY_ATTEMPTS"])

# Payload codecs and keys from the environment (the encrypted-workload process
# test, tests/payloads): WEFT_PAYLOAD_CODECS and WEFT_ENCRYPTION_KEYS,
# comma-separated.
if os.environ.get("WEFT_PAYLOAD_CODECS"):
    WEFT["PAYLOAD_CODECS"] = os.environ["WEFT_PAYLOAD_CODECS"].split(",")
if os.environ.get("WEFT_ENCRYPTION_KEYS"):
    WEFT["ENCRYPTION_KEYS"] = os.environ["WEFT_ENCRYPTION_KEYS"].split(",")
# Declared search attributes as JSON (that test's plaintext control).
if os.environ.get("WEFT_SEARCH_ATTRIBUTES"):
    import json

    WEFT["SEARCH_ATTRIBUTES"] = json.loads(os.environ["WEFT_SEARCH_ATTRIBUTES"])

# Django's Tasks framework on weft (docs/howto/django-tasks.md): django.tasks on
# Django >= 6.0, the django-tasks backport on 5.2; both read this one setting.
TASKS = {"default": {"BACKEND": "weft_django.tasks.WeftTaskBackend", "QUEUES": ["default"]}}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "loggers": {
        "weft_django": {
            "handlers": ["console"],
            "level": os.environ.get("WEFT_LOG_LEVEL", "WARNING"),
        },
    },
}
