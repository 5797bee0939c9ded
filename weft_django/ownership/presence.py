"""An engine's session presence on PostgreSQL: crash detection by the database.

Why: a claim's TTL is the only way to learn that a *stalled* engine is gone,
but a *dead* one says so at once: when its process dies (SIGKILL, OOM kill,
a host crash that resets the TCP connection, an exit without ``dispose``)
PostgreSQL ends its session, and every session-level lock it held goes.
Each engine holds ONE such lock, ``pg_advisory_lock(NAMESPACE, key)``, on a
dedicated autocommit connection of its own (outside Django's per-thread
connections, so no turn, renewal or ``close_all`` ever touches it), and
stores ``key`` on its ``EngineRecord`` (``presence_key``). Any other engine
then reads "record live, lock not granted" as "that engine is gone".

Invariants:
- The lock is taken before the record names the key and before any claim
  is taken, so a record with a key and no granted lock never belongs to an
  engine that is still booting.
- Gone is a *hint*, never a fence: a takeover of a gone holder is still the
  exact-holder CAS that bumps the epoch (``registry.takeover``), so if the
  "gone" engine is in fact alive (its presence connection broke, it is
  reconnecting) its later writes are refused by the fence, and it learns of
  the loss at its next renewal -- only its in-flight activity may run twice,
  which at-least-once activities allow.
- A stall (SIGSTOP, a black-holed connection) keeps the session, hence the
  lock: it stays on the TTL path. So do SQLite, ``lease`` mode and engines
  without a key (``presence_key`` NULL).
- A forked child (a Celery prefork pool process) inherits the socket but
  must neither use nor close it (closing would end the parent's session):
  after a fork the child's copy of the descriptor is pointed at /dev/null.
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
import threading
import weakref
from typing import Any

from django.db import connections

from weft_django import db as store
from weft_django.models import EngineRecord

logger = logging.getLogger("weft_django.engine")

#: First int4 of every presence lock ("weft"): pg_locks.classid of the lock.
NAMESPACE = 0x77656674
#: Keys are drawn from [1, KEY_MAX]; two engines with the same key cannot both
#: hold the lock, so the second draws again (``pg_try_advisory_lock``).
KEY_MAX = 2**31 - 1
KEY_ATTEMPTS = 16


def gone_sql(alias: str) -> str:
    """The one statement of a look (``db.ops(alias).gone_engines_sql``): the
    gone engines, the live ones among them marked stopped."""
    return store.ops(alias).gone_engines_sql(alias)


def supported(alias: str) -> bool:
    """Session presence works on this database (its sessions hold locks)."""
    return store.ops(alias).supports_session_presence


_open: weakref.WeakSet[SessionPresence] = weakref.WeakSet()


class SessionPresence:
    """One engine's presence lock and its dedicated connection."""

    def __init__(self, alias: str, engine_id: str) -> None:
        self.alias = alias
        self.engine_id = engine_id
        self.key: int | None = None
        self._conn: Any = None
        self._lock = threading.Lock()
        self._closed = False
        #: After this engine's own session was re-opened, how long (ms) it names
        #: no other engine gone (``gone_engines``); 0: at once.
        self.quiet_after_reconnect_ms = 0
        self._reconnected = False
        self._quiet_until_ms: int | None = None

    # -- the connection ---------------------------------------------------------
    def _connect(self) -> Any:
        # A wrapper of our own (never registered in ``connections``), used only
        # for its parameters: a configured pool or the thread's wrapper is not ours.
        wrapper = connections.create_connection(self.alias)
        params = wrapper.get_connection_params()
        params.pop("pool", None)
        database: Any = wrapper.Database  # type: ignore[attr-defined]  # psycopg
        conn = database.connect(**params)
        conn.autocommit = True
        return conn

    def _take(self, conn: Any, key: int | None) -> int:
        """Take the lock with ``key`` (or a fresh random one) on ``conn``."""
        for attempt in range(KEY_ATTEMPTS):
            candidate = key if key is not None and attempt == 0 else random.randint(1, KEY_MAX)
            row = conn.execute(
                "SELECT pg_try_advisory_lock(%s, %s)", (NAMESPACE, candidate)
            ).fetchone()
            if row and row[0]:
                return candidate
        raise RuntimeError(f"no free presence key after {KEY_ATTEMPTS} draws")

    def open(self) -> int:
        """Open the connection and take the lock; returns the key (boot, first)."""
        with self._lock:
            self._conn = self._connect()
            self.key = self._take(self._conn, None)
        _open.add(self)
        return self.key

    def _reconnect(self) -> None:
        """The connection broke: a new one, the same key if it is free (else a new
        one, written to the record), and the record live again."""
        self._drop_connection()
        conn = self._connect()
        key = self._take(conn, self.key)
        self._conn = conn
        if key != self.key:
            self.key = key
        self._reconnected = True
        # While the lock was gone, others may have marked this engine stopped and
        # taken its claims (fenced); from now on it is live again.
        EngineRecord.objects.using(self.alias).filter(pk=self.engine_id).update(
            presence_key=key, stopped_at=None
        )
        logger.warning(
            "engine %s: presence connection re-established (lock %s re-taken); claims "
            "taken meanwhile are learnt at the next renewal",
            self.engine_id,
            key,
        )

    def _drop_connection(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):  # already broken
                conn.close()

    # -- the watch ----------------------------------------------------------------
    def gone_engines(self, *, now_ms: int, window_ms: int) -> list[tuple[str, bool]]:
        """``(engine_id, marked_now)`` of every gone engine; the statement doubles
        as this connection's keepalive. A broken connection is re-opened (and the
        lock re-taken) before the next read; a failure raises after logging."""
        with self._lock:
            if self._closed:
                return []
            params = {
                "me": self.engine_id,
                "since": now_ms - window_ms,
                "namespace": NAMESPACE,
                "now": now_ms,
            }
            try:
                if self._conn is None or self._conn.closed or self._conn.broken:
                    self._reconnect()
                rows = self._look(params)
            except Exception:
                logger.warning(
                    "engine %s: presence connection failed; reconnecting",
                    self.engine_id,
                    exc_info=True,
                )
                self._drop_connection()
                self._reconnect()
                rows = self._look(params)
        return [(str(engine_id), bool(marked)) for engine_id, marked in rows]

    def _look(self, params: dict[str, Any]) -> list[Any]:
        """The gone engines (marking them stopped), or, while quiet after this
        engine's own reconnect, only a keepalive: nobody is named or marked."""
        if self._quiet(int(params["now"])):
            self._conn.execute("SELECT 1")
            return []
        return list(self._conn.execute(gone_sql(self.alias), params).fetchall())

    def _quiet(self, now_ms: int) -> bool:
        """Whether this look names nobody gone: this engine's own session was
        just re-opened, so the others' likely ended with it.

        Why: a database restart (or a failover) ends every session at once.
        The first engine to reconnect would see every other engine's lock
        gone, mark them all stopped and take over all their claims before
        expiry -- each in-flight activity of theirs then runs twice, for a
        fault they all survived. Its own lost session is the sign; for
        ``quiet_after_reconnect_ms`` it waits for the others to retake their
        locks (an engine that is really gone is named after that, or its
        claims expire on the TTL path). The gone set is a hint to the
        reclaim only; fencing never depends on it.
        """
        if self._reconnected:
            self._reconnected = False
            self._quiet_until_ms = now_ms + self.quiet_after_reconnect_ms
        if self._quiet_until_ms is not None and now_ms < self._quiet_until_ms:
            return True
        self._quiet_until_ms = None
        return False

    def backend_pid(self) -> int | None:
        """The PostgreSQL pid of the presence session (tests terminate it)."""
        with self._lock:
            if self._conn is None:
                return None
            return int(self._conn.info.backend_pid)

    def close(self) -> None:
        """End the session (dispose, after the record says stopped): the lock goes."""
        with self._lock:
            self._closed = True
            self._drop_connection()
        _open.discard(self)

    def _forget_in_child(self) -> None:
        conn, self._conn = self._conn, None
        self._closed = True
        if conn is None:
            return
        try:
            fd = conn.fileno()
        except Exception:
            return
        devnull = os.open(os.devnull, os.O_RDWR)
        try:
            os.dup2(devnull, fd)  # the parent's socket stays open; ours is /dev/null
        finally:
            os.close(devnull)
        _leaked.append(conn)  # never finalised against a reused descriptor


_leaked: list[Any] = []


def close_all() -> None:
    """Close every presence of this process (a test suite's teardown)."""
    for presence in list(_open):
        presence.close()


def _after_fork_in_child() -> None:
    for presence in list(_open):
        presence._forget_in_child()
    _open.clear()


os.register_at_fork(after_in_child=_after_fork_in_child)


__all__ = ["KEY_MAX", "NAMESPACE", "SessionPresence", "close_all", "supported"]
