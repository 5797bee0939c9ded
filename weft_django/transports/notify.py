"""PostgreSQL LISTEN/NOTIFY: millisecond wakes, with polling as the backstop.

``client`` calls ``notify_on_commit`` inside its transaction; the NOTIFY is
sent only once the durable write committed (a rolled-back start wakes
nobody). An engine ``Listener`` holds one dedicated psycopg connection (not
Django's: a LISTENing connection must not be shared with queries or closed
by request cycles) and sets an event when anything arrives. On SQLite all of
this is a no-op and polling finds the work.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable

from django.db import connections, transaction

logger = logging.getLogger("weft_django.transports")

WAKE_CHANNEL = "weft_wake"
DONE_CHANNEL = "weft_done"


def notify_on_commit(channel: str, payload: str, using: str) -> None:
    """Send ``NOTIFY channel, payload`` after the current transaction commits."""
    if connections[using].vendor != "postgresql":
        return

    def send() -> None:
        try:
            with connections[using].cursor() as cursor:
                cursor.execute("SELECT pg_notify(%s, %s)", [channel, payload[:7000]])
        except Exception:  # a lost NOTIFY costs one poll interval, never correctness
            logger.debug("NOTIFY %s failed", channel, exc_info=True)

    transaction.on_commit(send, using=using)


class Listener:
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
        return connections[using].vendor == "postgresql"

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="weft-listen", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _connect(self):  # type: ignore[no-untyped-def]
        import psycopg

        params = connections[self.using].get_connection_params()
        params.pop("cursor_factory", None)
        params.pop("context", None)
        params.pop("prepare_threshold", None)
        params.pop("server_side_binding", None)
        return psycopg.connect(autocommit=True, **params)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                conn = self._connect()
            except Exception:
                logger.warning("LISTEN connection failed; polling only", exc_info=True)
                self._stop.wait(5)
                continue
            try:
                for channel in self.channels:
                    conn.execute(f"LISTEN {channel}")
                while not self._stop.is_set():
                    for note in conn.notifies(timeout=1.0):
                        self.on_notify(note.channel, note.payload)
            except Exception:
                logger.warning("LISTEN connection lost; reconnecting", exc_info=True)
                self._stop.wait(1)
            finally:
                with contextlib.suppress(Exception):
                    conn.close()


def wait_for_notify(using: str, channel: str, timeout: float, match: Callable[[str], bool]) -> bool:
    """Block up to ``timeout`` s for a NOTIFY on ``channel`` whose payload matches."""
    import time

    listener = Listener(using, (channel,), lambda c, p: None)
    conn = listener._connect()
    try:
        conn.execute(f"LISTEN {channel}")
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            for note in conn.notifies(timeout=min(remaining, 1.0)):
                if match(note.payload):
                    return True
    finally:
        conn.close()
