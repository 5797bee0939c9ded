"""An engine thread's database connection: kept across turns, and bounded.

Why not ``django.db.close_old_connections()``: it marks the boundary of a
web *request*, and with Django's default ``CONN_MAX_AGE = 0`` it closes
every connection there. An engine thread has no requests; calling it before
each turn would open a new PostgreSQL session per turn (10–16 ms each, on
the hot path of every workflow). Here a
connection that saw an error and no longer answers is closed (the next
query reconnects), as Django does; a healthy one is kept. A positive
``CONN_MAX_AGE`` is still honoured; ``0`` ("per request") means "for the
life of the thread" here.

Why the idle-in-transaction bound: an engine cut off from the database
*inside* a batch (a network partition, a paused process) leaves its session
"idle in transaction" on the server, holding the row locks of its claim and
run until TCP gives up — hours by default. Every other engine's takeover of
those claims then waits on the locks, for as long as the partition lasts.
Engine sessions therefore carry
``idle_in_transaction_session_timeout = CLAIM_TTL``: the server ends such a
session, and frees its locks, no later than the claim could be taken over
anyway (expiry + grace). A batch never waits on user code inside its
transaction, so a live engine never comes near the bound; an *activity*
that holds its own transaction open and idle longer than the TTL on an
engine thread is ended by it too (docs: howto/deploy).
"""

from __future__ import annotations

import select
import threading
from typing import Any

from django.db import connections
from django.db.backends.signals import connection_created

from weft_django.db import ops_for_connection

_engine_thread = threading.local()


def refresh_connections() -> None:
    """Before a unit of engine work: drop broken connections, keep healthy ones."""
    for connection in connections.all(initialized_only=True):
        if connection.connection is None or connection.in_atomic_block:
            continue
        if connection.settings_dict.get("CONN_MAX_AGE") == 0:
            connection.close_at = None  # never obsolete by age on an engine thread
        connection.close_if_unusable_or_obsolete()
    drop_closed_connections()


def drop_closed_connections() -> None:
    """Before an activity attempt: close the idle connections the server ended.

    Why: an activity thread's connection sits idle between attempts; a
    session the server ended meanwhile (``pg_terminate_backend``, a restart,
    ``idle_session_timeout``) would fail the activity's first query — an
    infrastructure fault counted against the activity's retries. One
    non-blocking readiness check of the socket per connection; a round trip
    (``is_usable``) only when the server has spoken while the session was idle.
    """
    for connection in connections.all(initialized_only=True):
        if connection.connection is None or connection.in_atomic_block:
            continue
        if _server_spoke_while_idle(connection) and not connection.is_usable():
            connection.close()


def _server_spoke_while_idle(connection: Any) -> bool:
    """The idle session's socket is readable: the server sent something unasked
    (on an engine's own sessions, which never LISTEN: an error or a close)."""
    pgconn = getattr(connection.connection, "pgconn", None)
    if pgconn is None:  # not psycopg (SQLite): no socket to look at
        return False
    try:
        fd = pgconn.socket
        readable, _, _ = select.select([fd], [], [], 0)
    except Exception:  # a closed or invalid socket: let is_usable decide
        return True
    return bool(readable)


def mark_engine_thread(idle_limit_ms: int) -> None:
    """This thread drives workflows: bound its PostgreSQL sessions' idle transactions."""
    if getattr(_engine_thread, "idle_limit_ms", None) == idle_limit_ms:
        return
    _engine_thread.idle_limit_ms = idle_limit_ms
    for connection in connections.all(initialized_only=True):
        if connection.connection is not None and not connection.in_atomic_block:
            _bound_idle_transactions(connection)


def _bound_idle_transactions(connection: Any, *, new_session: bool = False) -> None:
    limit = getattr(_engine_thread, "idle_limit_ms", None)
    if limit is None:
        return
    if not new_session and getattr(connection, "_weft_idle_limit_ms", None) == limit:
        return
    if ops_for_connection(connection).bound_idle_transactions(connection, int(limit)):
        connection._weft_idle_limit_ms = limit


def _on_connection_created(sender: Any, connection: Any, **kwargs: Any) -> None:
    _bound_idle_transactions(connection, new_session=True)


connection_created.connect(_on_connection_created, dispatch_uid="weft-engine-idle-bound")
