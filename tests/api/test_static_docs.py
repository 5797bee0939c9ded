"""/api/docs/ needs no internet, and the example serves static files with DEBUG off.

Why through ``collectstatic`` and a fresh client: under gunicorn nothing but
the WSGI app serves ``/static/``; WhiteNoise reads ``STATIC_ROOT`` when its
middleware is built. A fresh test client builds the middleware chain anew,
with ``DEBUG=False`` (pytest-django's default) and the collected files, so
a 200 here is what a gunicorn worker would answer.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings as django_settings
from django.contrib.staticfiles import finders
from django.core.management import call_command
from django.test import Client

pytestmark = pytest.mark.django_db

ASSET = re.compile(rb"""(?:src|href)\s*=\s*["']([^"']+)["']""")
#: Absolute URLs in the page (script loads, stylesheets, fetches).
REMOTE = re.compile(rb"""["'(](?:https?:)?//[^"')\s]+""")


def _assets(html: bytes) -> list[str]:
    return [match.decode() for match in ASSET.findall(html)]


def test_swagger_ui_references_only_local_static_files() -> None:
    response = Client().get("/api/docs/")
    assert response.status_code == 200
    assets = _assets(response.content)
    static = [asset for asset in assets if asset.startswith(django_settings.STATIC_URL)]
    assert any(asset.endswith("swagger-ui-bundle.js") for asset in static), assets
    assert any(asset.endswith("swagger-ui.css") for asset in static), assets
    assert REMOTE.findall(response.content) == []
    for asset in static:
        relative = asset.removeprefix(django_settings.STATIC_URL)
        assert finders.find(relative) is not None, asset


def _assert_served(client: Client, root: Path | None = None) -> None:
    css = client.get("/static/admin/css/base.css")
    assert css.status_code == 200
    assert type(css).__module__.startswith("whitenoise")
    body = b"".join(css.streaming_content)  # type: ignore[attr-defined]
    source = root / "admin/css/base.css" if root else Path(str(finders.find("admin/css/base.css")))
    assert body == source.read_bytes()
    for asset in _assets(client.get("/api/docs/").content):
        if asset.startswith(django_settings.STATIC_URL):
            assert client.get(asset).status_code == 200, asset
    assert client.get("/static/admin/css/no-such-file.css").status_code == 404


def test_the_example_serves_static_files_with_debug_off_and_no_build_step(settings: Any) -> None:
    settings.DEBUG = False
    settings.WHITENOISE_USE_FINDERS = True  # the example's default
    _assert_served(Client())  # a fresh handler: WhiteNoise reads the settings now


def test_collected_static_files_are_served_without_the_finders(
    tmp_path: Path, settings: Any
) -> None:
    settings.STATIC_ROOT = tmp_path / "static"
    settings.DEBUG = False
    settings.WHITENOISE_USE_FINDERS = False  # a deployment: only what collectstatic gathered
    call_command("collectstatic", interactive=False, verbosity=0)
    _assert_served(Client(), Path(settings.STATIC_ROOT))
