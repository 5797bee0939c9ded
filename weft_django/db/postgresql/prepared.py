"""The claim protocol's hottest statements, on a server-binding cursor.

Why: a claim cycle is three short statements (the read, the acquire CAS,
the release CAS). Through Django's cursor (client-side binding) PostgreSQL
parses and plans each of them on every call — for the claim statement's
data-modifying CTE that planning is as much server CPU as the rest of the
cycle — and Django's cursor layers add client CPU per statement. Here a
statement runs on a server-binding psycopg cursor of the *same* Django
connection (same session, same transaction, same adapters), so the driver
can keep it as a prepared statement, planned once per session.

Prepared or not is the connection's own setting, never weft's:
``DATABASES[alias]["OPTIONS"]["prepare_threshold"]``. Django's default
(``None``) prepares nothing — what a transaction-pooling PgBouncer needs —
and each statement is then one unnamed Parse/Bind/Execute, safe through any
pooler; a number (psycopg's own default is 5) prepares a statement after
that many executions on a session.

What stays Django's, so nothing observable changes: connecting and health
checks, the thread-sharing and broken-transaction checks, the translation of
driver errors (a ``django.db.DatabaseError`` with the psycopg error as its
``__cause__``: the batch's retry reads its ``sqlstate``), and every
``execute_wrapper`` (each sees the statement). When the connection logs
queries (``DEBUG``, ``assertNumQueries``, ``CaptureQueriesContext``), the
statement runs through Django's cursor instead, so the log stays complete.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from django.db import connections

try:  # the PostgreSQL extra; without it nothing here is reached
    import psycopg
except ImportError:  # pragma: no cover - SQLite-only installs
    psycopg = None  # type: ignore[assignment]

_CURSOR_ATTR = "_weft_server_binding_cursor"


def fetchone(using: str, sql: str, params: Sequence[Any]) -> tuple[Any, ...] | None:
    """Run ``sql`` (``%s`` placeholders) on ``using`` and return its first row."""
    wrapper = connections[using]
    if wrapper.queries_logged:
        return _through_django(wrapper, sql, params)
    wrapper.close_if_health_check_failed()
    wrapper.ensure_connection()
    raw = wrapper.connection
    if psycopg is None or not isinstance(raw, psycopg.Connection):
        return _through_django(wrapper, sql, params)
    wrapper.validate_thread_sharing()
    cursor = _cursor(wrapper, raw)
    if not wrapper.execute_wrappers:  # nobody to show the statement to
        wrapper.validate_no_broken_transaction()
        with wrapper.wrap_database_errors:
            cursor.execute(sql, params)
            row = cursor.fetchone()
        return None if row is None else tuple(row)

    def execute(sql: str, params: Any, many: bool, context: Any) -> Any:
        wrapper.validate_no_broken_transaction()
        with wrapper.wrap_database_errors:
            return cursor.execute(sql, params)

    executor: Any = execute
    for hook in reversed(wrapper.execute_wrappers):
        executor = functools.partial(hook, executor)
    executor(sql, params, False, {"connection": wrapper, "cursor": cursor})
    with wrapper.wrap_database_errors:
        row = cursor.fetchone()
    return None if row is None else tuple(row)


def _cursor(wrapper: Any, raw: Any) -> Any:
    """One server-binding cursor per driver connection, kept on the Django
    wrapper (which is per thread); a reconnect gets a new one."""
    cursor = getattr(wrapper, _CURSOR_ATTR, None)
    if cursor is None or cursor.connection is not raw or cursor.closed:
        cursor = psycopg.Cursor(raw)
        setattr(wrapper, _CURSOR_ATTR, cursor)
    return cursor


def _through_django(wrapper: Any, sql: str, params: Sequence[Any]) -> tuple[Any, ...] | None:
    with wrapper.cursor() as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
    return None if row is None else tuple(row)


__all__ = ["fetchone"]
