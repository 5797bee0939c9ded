"""The LISTEN side of PostgreSQL wakes: a thread on a dedicated connection.

Why a connection of its own (psycopg's, not Django's): a LISTENing
connection must not be shared with queries or closed by request cycles.
The invariant of ``Listener``: while its thread runs it is either
LISTENing (``connected``) or reconnecting, and after every (re)connect
``on_connect`` runs -- what a lost connection missed may have happened, so
the subclass asks for whatever finds it (``transports.notify``). Between
two waits the thread calls ``between`` with the connection free for a
statement of its own (the pickup routing's peer read).
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable
from typing import Any

from django.db import connections

from weft_django.db import ops
from weft_django.engine.wakes import Listening

logger = logging.getLogger("weft_django.transports")


def supported(using: str) -> bool:
    """The database of ``using`` has LISTEN/NOTIFY (the vendor seam says)."""
    return ops(using).supports_listen_notify


def listen_sql(channel: str, mark: str | None = None) -> Any:
    from psycopg import sql

    statement = sql.SQL("LISTEN {}").format(sql.Identifier(channel))
    if mark is None:
        return statement
    return sql.SQL("{} /* {} */").format(statement, sql.SQL(mark))


class Listener(Listening):
    """A background thread that LISTENs and calls ``on_notify(channel, payload)``."""

    #: Seconds between checks of ``stop()`` while no notification arrives.
    tick: float = 1.0

    def __init__(
        self, using: str, channels: tuple[str, ...], on_notify: Callable[[str, str], None]
    ) -> None:
        self.using = using
        self.channels = channels
        self.on_notify = on_notify
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._connected = False

    @property
    def connected(self) -> bool:
        return self._connected and not self._stop.is_set()

    @staticmethod
    def available(using: str) -> bool:
        return supported(using)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="weft-listen", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    #: A comment after each LISTEN statement (``transports.pickup_route``).
    listen_mark: str | None = None

    def connect(self) -> Any:
        """A new autocommit psycopg connection LISTENing on ``channels``."""
        import psycopg

        params = connections[self.using].get_connection_params()
        for private in ("cursor_factory", "context", "prepare_threshold", "server_side_binding"):
            params.pop(private, None)
        conn = psycopg.connect(autocommit=True, **params)
        try:
            for channel in self.channels:
                conn.execute(listen_sql(channel, self.listen_mark))
        except Exception:
            conn.close()
            raise
        return conn

    def _run(self, conn: Any = None) -> None:
        while not self._stop.is_set():
            if conn is None:
                try:
                    conn = self.connect()
                except Exception:
                    logger.warning("LISTEN connection failed; polling only", exc_info=True)
                    self._stop.wait(5)
                    continue
            self._connected = True
            self.on_connect()
            try:
                while not self._stop.is_set():
                    # One batch per wait (``stop_after``: never cut a batch
                    # short, which would drop the rest of it), then ``between``.
                    for note in conn.notifies(timeout=self.wait_s(), stop_after=1):
                        self.on_notify(note.channel, note.payload)
                    self.between(conn)
            except Exception:
                self._connected = False
                if not self._stop.is_set():
                    logger.warning("LISTEN connection lost; reconnecting", exc_info=True)
                    self._stop.wait(1)
            finally:
                self._connected = False
                with contextlib.suppress(Exception):
                    conn.close()
                conn = None

    def on_connect(self) -> None:
        """A new connection LISTENs: what the lost one missed may have happened."""

    def wait_s(self) -> float:
        """How long to block for notifications before ``between`` runs."""
        return self.tick

    def between(self, conn: Any) -> None:
        """Between two waits, on the listener's thread (its connection is free)."""


__all__ = ["Listener", "listen_sql", "supported"]
