"""Settings of the ASGI server of ``tests/engines/test_asgi_client.py``: the
project's, with the async test views as the URLconf."""

from __future__ import annotations

from project.settings import *  # noqa: F403

ROOT_URLCONF = "tests.procs.asgi_urls"
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
