"""``uvicorn tests.procs.asgi_app:application``: the ASGI app of the async-client test."""

from __future__ import annotations

import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.procs.asgi_settings")

from django.core.asgi import get_asgi_application

application = get_asgi_application()
