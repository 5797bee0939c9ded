"""Who may call the weft API (SPEC §3 ``API_PERMISSION_CLASSES``, §5).

Why the classes are resolved per request and not bound at import: the
setting lives in the ``WEFT`` dict, which reloads on ``setting_changed``,
so ``override_settings(WEFT={"API_PERMISSION_CLASSES": [...]})`` must take
effect on the next request. Imports are cached per tuple of paths.

The async-activity completion endpoints do not use these classes: the
token alone authorises its own completion (it is ≥ 128 random bits, stored
hashed, single use), so an external system can call back without a Django
account. Those views use ``AllowAny`` and no authentication at all (so no
session cookie, and no CSRF check that would come with it).
"""

from __future__ import annotations

from functools import lru_cache

from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import import_string
from rest_framework.permissions import BasePermission

from weft_django.conf import get_settings


@lru_cache(maxsize=32)
def _load(paths: tuple[str, ...]) -> tuple[type[BasePermission], ...]:
    classes: list[type[BasePermission]] = []
    for path in paths:
        try:
            cls = import_string(path)
        except ImportError as exc:
            raise ImproperlyConfigured(
                f"WEFT['API_PERMISSION_CLASSES'] names {path!r}, which cannot be imported: {exc}"
            ) from exc
        classes.append(cls)
    return tuple(classes)


def api_permission_classes() -> tuple[type[BasePermission], ...]:
    """The permission classes named by ``WEFT["API_PERMISSION_CLASSES"]`` now."""
    return _load(get_settings().api_permission_classes)


def api_permissions() -> list[BasePermission]:
    """Fresh instances for one request (DRF's ``get_permissions`` contract)."""
    return [cls() for cls in api_permission_classes()]
