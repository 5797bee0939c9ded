"""The REST API (DRF): ``path("api/weft/", include("weft_django.api.urls"))``.

The API is the ``api`` extra: without Django REST framework and
drf-spectacular, importing any of it (``include("weft_django.api.urls")``
does) raises ``ImproperlyConfigured`` naming the command that installs them,
instead of a bare ``ModuleNotFoundError`` from deep inside a view module.
"""

from importlib.util import find_spec

from django.core.exceptions import ImproperlyConfigured

_missing = [name for name in ("rest_framework", "drf_spectacular") if find_spec(name) is None]
if _missing:
    raise ImproperlyConfigured(
        "weft_django.api needs Django REST framework and drf-spectacular "
        f"(missing: {', '.join(_missing)}); install the api extra: "
        'pip install "weft-django[api]"'
    )
