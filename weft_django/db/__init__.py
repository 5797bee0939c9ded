"""The vendor seam: ``ops(alias)`` is the store-operations object of a database.

Why one seam: vendor SQL (the claim statement, the joint lock, renewals, the
server clock, the session's idle-transaction bound) lives in one module per
database behind one interface (``base.StoreOps``), the way Django keeps it
behind ``connection.ops``. Code above asks for an ops object and its
capability flags; it never compares ``connection.vendor`` itself.

``capability_problems(alias, ownership)`` is the rule "can this database run
weft's conditional batch safely", shared by the system checks and the
engine's start-up gate. It reads the ``DATABASES`` entry and the backend
class's ``vendor`` (what ``connections[alias].vendor`` would return), and
opens no connection.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings as django_settings
from django.core import checks
from django.core.exceptions import ImproperlyConfigured
from django.core.signals import setting_changed
from django.db import connections
from django.db.utils import load_backend

from weft_django.db.base import StoreOps
from weft_django.db.postgresql import PostgreSQLOps
from weft_django.db.sqlite import SQLiteOps

_BY_VENDOR: dict[str, StoreOps] = {"postgresql": PostgreSQLOps(), "sqlite": SQLiteOps()}
_PORTABLE = StoreOps()
#: alias -> its ops object. An alias's backend is fixed for the life of the
#: process (Django reads ``DATABASES`` once per handler), and ``connections[alias]``
#: is a thread-local lookup that the claim cycle would otherwise pay per
#: statement; dropped when ``DATABASES`` is overridden, to be safe.
_BY_ALIAS: dict[str, StoreOps] = {}


def vendor_ops(vendor: str) -> StoreOps:
    """The ops object for a vendor name (the portable one for any other)."""
    return _BY_VENDOR.get(vendor, _PORTABLE)


def ops(using: str) -> StoreOps:
    """The ops object of database alias ``using``."""
    found = _BY_ALIAS.get(using)
    if found is None:
        found = _BY_ALIAS[using] = vendor_ops(connections[using].vendor)
    return found


def _on_setting_changed(*, setting: str, **_: Any) -> None:
    if setting == "DATABASES":
        _BY_ALIAS.clear()


setting_changed.connect(_on_setting_changed, dispatch_uid="weft_django.db.ops_by_alias")


def ops_for_connection(connection: Any) -> StoreOps:
    """The ops object of an open ``DatabaseWrapper`` (signal handlers get one)."""
    return vendor_ops(connection.vendor)


def configured_vendor(entry: dict[str, Any]) -> str:
    """The vendor of a ``DATABASES`` entry, from its backend class; ``"unknown"``
    when the backend cannot be imported (its driver is not installed)."""
    try:
        return str(load_backend(str(entry.get("ENGINE", ""))).DatabaseWrapper.vendor)
    except (ImportError, ImproperlyConfigured, AttributeError):
        return "unknown"


def capability_problems(alias: str, ownership: str) -> list[checks.CheckMessage]:
    """Why weft cannot run ``ownership`` on database ``alias`` (empty: it can)."""
    databases = getattr(django_settings, "DATABASES", {})
    if alias not in databases:
        return [
            checks.Error(
                f"WEFT['DATABASE'] is {alias!r}, which is not in settings.DATABASES "
                f"({', '.join(databases) or 'none configured'})",
                id="weft.E015",
            )
        ]
    entry = databases[alias]
    return vendor_ops(configured_vendor(entry)).capability_problems(alias, entry, ownership)


__all__ = [
    "StoreOps",
    "capability_problems",
    "configured_vendor",
    "ops",
    "ops_for_connection",
    "vendor_ops",
]
