"""Settings of the servers of ``tests/engines/test_published_live.py``: the
project's (its URLconf mounts the weft API)."""

from __future__ import annotations

from project.settings import *  # noqa: F403

ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
