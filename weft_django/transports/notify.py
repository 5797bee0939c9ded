"""PostgreSQL LISTEN/NOTIFY: millisecond wakes, with polling as the backstop.

``NotifyBackend`` is the ``WakeBackend`` for PostgreSQL: ``announce`` hands
it each wake once the writing transaction committed (a rolled-back start
wakes nobody), and it sends ``pg_notify`` -- ``weft_wake`` (payload: the
workflow id) for a wake, ``weft_done`` (payload: the run id) for a finished
run. An engine ``Listener`` holds one dedicated psycopg connection (not
Django's: a LISTENing connection must not be shared with queries or closed
by request cycles) and calls back when anything arrives. On other databases
the backend is unavailable and polling finds the work.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from typing import Any, ClassVar

from django.db import connections, transaction

from weft_django.db import ops
from weft_django.engine.wakes import DoneWaiter, Listening, Wake, WakeBackend

logger = logging.getLogger("weft_django.transports")

WAKE_CHANNEL = "weft_wake"
DONE_CHANNEL = "weft_done"


def _send(channel: str, payload: str, using: str) -> None:
    try:
        with connections[using].cursor() as cursor:
            cursor.execute("SELECT pg_notify(%s, %s)", [channel, payload[:7000]])
    except Exception:  # a lost NOTIFY costs one poll interval, never correctness
        logger.debug("NOTIFY %s failed", channel, exc_info=True)


def notify_on_commit(channel: str, payload: str, using: str) -> None:
    """Send ``NOTIFY channel, payload`` after the current transaction commits."""
    if not _supported(using):
        return
    transaction.on_commit(lambda: _send(channel, payload, using), using=using)


def _supported(using: str) -> bool:
    """The database of ``using`` has LISTEN/NOTIFY (the vendor seam says)."""
    return ops(using).supports_listen_notify


def _listen_sql(channel: str) -> Any:
    from psycopg import sql

    return sql.SQL("LISTEN {}").format(sql.Identifier(channel))


class Listener(Listening):
    """A background thread that LISTENs and calls ``on_notify(channel, payload)``."""

    def __init__(
        self, using: str, channels: tuple[str, ...], on_notify: Callable[[str, str], None]
    ) -> None:
        self.using = using
        self.channels = channels
        self.on_notify = on_notify
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @staticmethod
    def available(using: str) -> bool:
        return _supported(using)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="weft-listen", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def connect(self) -> Any:
        """A new autocommit psycopg connection LISTENing on ``channels``."""
        import psycopg

        params = connections[self.using].get_connection_params()
        for private in ("cursor_factory", "context", "prepare_threshold", "server_side_binding"):
            params.pop(private, None)
        conn = psycopg.connect(autocommit=True, **params)
        try:
            for channel in self.channels:
                conn.execute(_listen_sql(channel))
        except Exception:
            conn.close()
            raise
        return conn

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                conn = self.connect()
            except Exception:
                logger.warning("LISTEN connection failed; polling only", exc_info=True)
                self._stop.wait(5)
                continue
            try:
                while not self._stop.is_set():
                    for note in conn.notifies(timeout=1.0):
                        self.on_notify(note.channel, note.payload)
            except Exception:
                logger.warning("LISTEN connection lost; reconnecting", exc_info=True)
                self._stop.wait(1)
            finally:
                with contextlib.suppress(Exception):
                    conn.close()


class NotifyBackend(WakeBackend):
    """Wakes as PostgreSQL NOTIFYs; engines LISTEN, callers wait for ``weft_done``."""

    name: ClassVar[str] = "notify"
    supports_listen: ClassVar[bool] = True
    supports_wait_done: ClassVar[bool] = True

    def available(self, using: str) -> bool:
        return Listener.available(using)

    def deliver(self, wake: Wake) -> None:
        if wake.event == "finished":
            _send(DONE_CHANNEL, wake.run_id, wake.using)
        else:
            _send(WAKE_CHANNEL, wake.workflow_id or "", wake.using)

    def listen(self, using: str, on_wake: Callable[[], None]) -> Listening | None:
        listener = Listener(using, (WAKE_CHANNEL,), lambda channel, payload: on_wake())
        listener.start()
        return listener

    def done_waiter(self, using: str, run_id: str) -> DoneWaiter:
        return _NotifyDoneWaiter(
            Listener(using, (DONE_CHANNEL,), lambda c, p: None).connect(), run_id
        )


class _NotifyDoneWaiter(DoneWaiter):
    """``LISTEN weft_done`` on its own connection, open from creation to ``close``."""

    def __init__(self, conn: Any, run_id: str) -> None:
        self._conn = conn
        self._run_id = run_id

    def wait(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            for note in self._conn.notifies(timeout=min(remaining, 1.0)):
                if note.payload == self._run_id:
                    return True

    def close(self) -> None:
        self._conn.close()


__all__ = [
    "DONE_CHANNEL",
    "WAKE_CHANNEL",
    "Listener",
    "NotifyBackend",
    "notify_on_commit",
]
