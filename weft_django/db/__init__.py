"""The vendor seam: ``ops(alias)`` is the store-operations object of a database.

Why one seam: vendor SQL (the claim statement, the joint lock, renewals, the
server clock, the session's idle-transaction bound) lives in one module per
database behind one interface (``base.StoreOps``), the way Django keeps it
behind ``connection.ops``. Code above asks for an ops object and its
capability flags; it never compares ``connection.vendor`` itself.

``capability_problems(alias, ownership)`` is the rule "can this database run
weft's conditional batch safely", shared by the system checks and the
engine's start-up gate. It reads the ``DATABASES`` entry, the backend
class's ``vendor`` (what ``connections[alias].vendor`` would return) and
the ``supports_transactions`` its features class declares, and opens no
connection. The gate then also reads ``connection.features.supports_transactions``
itself (SPEC §4.3, ``transaction_problems``): a backend that can only learn
it from the server (Django's default probes it) is judged on the answer,
not on its name. The vendor is still needed after that: the batch's
isolation rules are known (and tested) for PostgreSQL and SQLite only.
"""

from __future__ import annotations

import inspect
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


def declared_supports_transactions(entry: dict[str, Any]) -> bool | None:
    """What a ``DATABASES`` entry's backend declares as ``features.supports_transactions``
    without a connection: its value when the features class sets a plain bool,
    ``None`` when only the server can say (a property that probes it) or the
    backend cannot be imported."""
    try:
        wrapper = load_backend(str(entry.get("ENGINE", ""))).DatabaseWrapper
        declared = inspect.getattr_static(wrapper.features_class, "supports_transactions")
    except (ImportError, ImproperlyConfigured, AttributeError):
        return None
    return declared if isinstance(declared, bool) else None


def _no_transactions(alias: str, entry: dict[str, Any], ownership: str) -> checks.Error:
    return checks.Error(
        f"Database {alias!r} ({str(entry.get('ENGINE', ''))!r}) reports "
        f"features.supports_transactions=False; OWNERSHIP={ownership!r} needs transactions "
        "(every fenced write commits together with its claim check, or not at all)",
        hint="Use PostgreSQL, or SQLite with transaction_mode IMMEDIATE; or OWNERSHIP='none'.",
        id="weft.E048",
    )


def capability_problems(alias: str, ownership: str) -> list[checks.CheckMessage]:
    """Why weft cannot run ``ownership`` on database ``alias`` (empty: it can).
    Opens no connection (the system checks run it)."""
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
    if ownership != "none" and declared_supports_transactions(entry) is False:
        return [_no_transactions(alias, entry, ownership)]
    return vendor_ops(configured_vendor(entry)).capability_problems(alias, entry, ownership)


def transaction_problems(alias: str, ownership: str) -> list[checks.CheckMessage]:
    """The start-up gate's own reading of ``connections[alias].features.supports_transactions``
    (SPEC §4.3). May open a connection: a backend that probes the server to
    answer does so here, once, at boot."""
    if ownership == "none":
        return []
    if connections[alias].features.supports_transactions:
        return []
    entry = dict(getattr(django_settings, "DATABASES", {}).get(alias, {}))
    return [_no_transactions(alias, entry, ownership)]


__all__ = [
    "StoreOps",
    "capability_problems",
    "configured_vendor",
    "declared_supports_transactions",
    "ops",
    "ops_for_connection",
    "transaction_problems",
    "vendor_ops",
]
