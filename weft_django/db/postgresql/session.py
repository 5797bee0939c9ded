"""Per-session and per-transaction server settings (PostgreSQL).

Invariant: a bound set here never outlives what it was set for -- the idle
bound lives with the session it was set on, a statement bound with the
transaction (``set_config(..., true)``), and its previous value is handed
back so the caller lifts it before the fence.
"""

from __future__ import annotations

from typing import Any

from django.db import connections


def set_idle_in_transaction_timeout(connection: Any, limit_ms: int) -> None:
    """``SET idle_in_transaction_session_timeout`` on ``connection``'s session:
    the server ends a session idle inside a transaction longer than this."""
    with connection.cursor() as cursor:
        cursor.execute(f"SET idle_in_transaction_session_timeout = {int(limit_ms)}")


def set_local_statement_timeout(using: str, limit_ms: int) -> str:
    """Bound each statement of the current transaction by ``limit_ms``; returns
    the bound it replaced (for ``restore_statement_timeout``)."""
    with connections[using].cursor() as cursor:
        cursor.execute(
            "SELECT current_setting('statement_timeout'), "
            "set_config('statement_timeout', %s, true)",
            [str(limit_ms)],
        )
        return str(cursor.fetchone()[0])


def restore_statement_timeout(using: str, before: str) -> None:
    with connections[using].cursor() as cursor:
        cursor.execute("SELECT set_config('statement_timeout', %s, true)", [before])
