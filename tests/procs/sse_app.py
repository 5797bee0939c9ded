"""``uvicorn tests.procs.sse_app:application``: the project as an ASGI app
(the SSE test reads ``streams/<key>/`` from it over real HTTP)."""

from __future__ import annotations

import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.procs.sse_settings")

from django.core.asgi import get_asgi_application

application = get_asgi_application()
