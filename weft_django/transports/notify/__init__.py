"""PostgreSQL LISTEN/NOTIFY: millisecond wakes, with polling as the backstop.

The NOTIFY wake transport: ``NotifyBackend`` here, the engine's LISTEN thread on a
dedicated connection (``listener``), pickup routing (``pickup_route``) and the async
``weft_done`` wait of ``WorkflowHandle.aresult`` (``aio``). Every wake it sends is also
found by polling, so a lost NOTIFY only delays work; on other databases the backend is
unavailable and polling finds the work.

``NotifyBackend`` is the ``WakeBackend`` for PostgreSQL: ``announce`` hands
it each wake once the writing transaction committed (a rolled-back start
wakes nobody), and it sends ``pg_notify`` -- ``weft_wake`` (payload: the
workflow id, ``pickup <workflow id>`` for a wake that made a run pending)
for a wake, ``weft_done`` (payload: the run id) for a finished run. A
write that can send it in its own statement (``client.start``) asks
``in_statement`` and PostgreSQL delivers it on commit. An engine
``Listener`` holds one dedicated psycopg connection (not Django's: a
LISTENing connection must not be shared with queries or closed by request
cycles) and calls back when anything arrives; a pickup wake runs the
engine's pickup alone -- at once on the one engine it is routed to, after a
short delay on the others and only if one of its runs is still pending then
(``transports.notify.pickup_route``) -- and any other payload its whole
maintenance pass.

Callers of ``WorkflowHandle.result()`` share one ``LISTEN weft_done``
connection per process and database (``_DoneHub``): a waiter registers its
run id before the caller re-reads the row, so a finish is either seen by
that read or delivered to the waiter -- and no call pays for a connection
of its own.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from typing import Any, ClassVar

from django.db import connections, transaction

from weft_django.conf import get_settings
from weft_django.db.postgresql.pickup import any_pending_statement
from weft_django.engine.wakes import AsyncDoneWaiter, DoneWaiter, Listening, Wake, WakeBackend
from weft_django.transports.notify.listener import Listener, listen_sql, supported
from weft_django.transports.notify.pickup_route import ROUTE_MARK, PickupRoute

logger = logging.getLogger("weft_django.transports")

WAKE_CHANNEL = "weft_wake"
DONE_CHANNEL = "weft_done"
#: ``weft_wake`` payload prefix of a wake that made a run pending.
PICKUP_PREFIX = "pickup "


def _send(channel: str, payload: str, using: str) -> None:
    try:
        with connections[using].cursor() as cursor:
            cursor.execute("SELECT pg_notify(%s, %s)", [channel, payload[:7000]])
    except Exception:  # a lost NOTIFY costs one poll interval, never correctness
        logger.debug("NOTIFY %s failed", channel, exc_info=True)


def notify_on_commit(channel: str, payload: str, using: str) -> None:
    """Send ``NOTIFY channel, payload`` after the current transaction commits."""
    if not supported(using):
        return
    transaction.on_commit(lambda: _send(channel, payload, using), using=using)


class NotifyBackend(WakeBackend):
    """Wakes as PostgreSQL NOTIFYs; engines LISTEN, callers wait for ``weft_done``."""

    name: ClassVar[str] = "notify"
    supports_listen: ClassVar[bool] = True
    supports_wait_done: ClassVar[bool] = True

    def available(self, using: str) -> bool:
        return Listener.available(using)

    def deliver(self, wake: Wake) -> None:
        _send(*self.in_statement(wake), wake.using)

    def deliver_many(self, wakes: list[Wake]) -> None:
        """Every wake's NOTIFY in one statement (PostgreSQL folds duplicates)."""
        if not wakes:
            return
        pairs = sorted({self.in_statement(wake) for wake in wakes})
        try:
            with connections[wakes[0].using].cursor() as cursor:
                cursor.execute(
                    "SELECT pg_notify(c, p) FROM unnest(%s::text[], %s::text[]) AS t(c, p)",
                    [[c for c, _ in pairs], [p[:7000] for _, p in pairs]],
                )
        except Exception:  # a lost NOTIFY costs one poll interval, never correctness
            logger.debug("bulk NOTIFY of %d wakes failed", len(pairs), exc_info=True)

    def in_statement(self, wake: Wake) -> tuple[str, str]:
        if wake.event == "finished":
            return DONE_CHANNEL, wake.run_id
        if wake.is_pickup:
            return WAKE_CHANNEL, PICKUP_PREFIX + (wake.workflow_id or "")
        return WAKE_CHANNEL, wake.workflow_id or ""

    def listen(
        self,
        using: str,
        on_wake: Callable[[], None],
        on_pickup: Callable[[], None] | None = None,
    ) -> Listening | None:
        # Routed only where every engine may pick up (per-workflow claims):
        # under the global lease only its holder does, so a wake routed to a
        # standby would wait for the fallback.
        routes = on_pickup is not None and get_settings().ownership == "workflow-lease"
        route = None
        if on_pickup is not None and routes:
            route = PickupRoute(on_pickup, gate=lambda ids: listener.any_pending(ids))

        def on_notify(channel: str, payload: str) -> None:
            if route is not None and payload.startswith(PICKUP_PREFIX):
                route.wake(payload[len(PICKUP_PREFIX) :])
            else:
                on_wake()

        listener = _WakeListener(using, (WAKE_CHANNEL,), on_notify, on_wake, route)
        listener.start()
        return listener

    def done_waiter(self, using: str, run_id: str) -> DoneWaiter:
        return _DoneHub.get(using).subscribe(run_id)

    async def open_async_done_waiter(self, using: str, run_id: str) -> AsyncDoneWaiter | None:
        from weft_django.transports.notify.aio import open_done_waiter

        return await open_done_waiter(using, run_id)


class _WakeListener(Listener):
    """An engine's ``LISTEN weft_wake``: each (re)connect asks for a full pass,
    which finds what a wake lost while the connection was down announced.

    With a ``route`` (the engine takes pickup wakes), its LISTEN carries
    ``ROUTE_MARK`` so the other engines count it among the live peers, and
    between waits the thread fires the armed fallback pickup (its gate, a
    marked read of whether any of its runs is still pending, runs on this
    connection) and re-reads the peers (``transports.pickup_route``)."""

    def __init__(
        self,
        using: str,
        channels: tuple[str, ...],
        on_notify: Callable[[str, str], None],
        on_wake: Callable[[], None],
        route: PickupRoute | None = None,
    ) -> None:
        super().__init__(using, channels, on_notify)
        self.on_wake = on_wake
        self.route = route
        self._between_conn: Any = None
        self._gate_sql: str | None = None
        if route is not None:
            self.listen_mark = ROUTE_MARK

    def on_connect(self) -> None:
        if self.route is not None:
            self.route.forget()
        self.on_wake()

    def wait_s(self) -> float:
        return self.tick if self.route is None else self.route.timeout(self.tick)

    def any_pending(self, workflow_ids: list[str]) -> bool:
        """The fallback's gate, on this thread's connection (``between``)."""
        conn = self._between_conn
        if conn is None:
            return True
        if self._gate_sql is None:
            self._gate_sql = any_pending_statement(self.using, ROUTE_MARK)
        row = conn.execute(self._gate_sql, [workflow_ids]).fetchone()
        return bool(row is None or row[0])

    def between(self, conn: Any) -> None:
        if self.route is None:
            return
        self._between_conn = conn
        try:
            self.route.fire_due()
        finally:
            self._between_conn = None
        if self.route.refresh_due():
            self.route.refresh(conn, listen_sql(WAKE_CHANNEL, ROUTE_MARK))


class _DoneHub(Listener):
    """One process's shared ``LISTEN weft_done`` for one database.

    Invariant: ``subscribe`` returns only while the hub's connection LISTENs
    (the first call connects before it returns), so a finish committed after
    the subscription is delivered to it -- or, while the hub reconnects, its
    waiters are all set once the new connection LISTENs (they re-read).
    """

    _hubs: dict[tuple[int, str, str], _DoneHub] = {}
    _hubs_lock = threading.Lock()
    #: ``close_done_hubs`` waits at most about this long for the connection to close.
    tick = 0.1

    def __init__(self, using: str) -> None:
        super().__init__(using, (DONE_CHANNEL,), self._deliver)
        self._waiters: dict[str, set[threading.Event]] = {}
        self._lock = threading.Lock()

    @classmethod
    def get(cls, using: str) -> _DoneHub:
        # Per process (a forked child must not share its parent's socket) and
        # per database name (a test run renames the alias's database).
        key = (os.getpid(), using, str(connections[using].settings_dict.get("NAME")))
        with cls._hubs_lock:
            hub = cls._hubs.get(key)
            if hub is None:
                hub = cls(using)
                conn = hub.connect()  # LISTENing before the first subscriber returns
                hub._thread = threading.Thread(
                    target=hub._run, args=(conn,), name="weft-done", daemon=True
                )
                hub._thread.start()
                cls._hubs[key] = hub
            return hub

    @classmethod
    def close_all(cls) -> None:
        with cls._hubs_lock:
            hubs, cls._hubs = list(cls._hubs.values()), {}
        for hub in hubs:
            hub.stop()
            if hub._thread is not None:
                hub._thread.join(timeout=5 * hub.tick)

    def subscribe(self, run_id: str) -> _HubWaiter:
        event = threading.Event()
        with self._lock:
            self._waiters.setdefault(run_id, set()).add(event)
        return _HubWaiter(self, run_id, event)

    def unsubscribe(self, run_id: str, event: threading.Event) -> None:
        with self._lock:
            events = self._waiters.get(run_id)
            if events is not None:
                events.discard(event)
                if not events:
                    del self._waiters[run_id]

    def _deliver(self, channel: str, payload: str) -> None:
        with self._lock:
            events = list(self._waiters.get(payload, ()))
        for event in events:
            event.set()

    def on_connect(self) -> None:
        with self._lock:
            events = [e for group in self._waiters.values() for e in group]
        for event in events:
            event.set()


def close_done_hubs() -> None:
    """Close this process's shared ``weft_done`` connections (a test's teardown:
    a database with a session open cannot be dropped). The next
    ``result()`` opens one again."""
    _DoneHub.close_all()


class _HubWaiter(DoneWaiter):
    """One caller's subscription on the shared hub, from creation to ``close``."""

    def __init__(self, hub: _DoneHub, run_id: str, event: threading.Event) -> None:
        self._hub = hub
        self._run_id = run_id
        self._event = event

    def wait(self, timeout: float) -> bool:
        if not self._event.wait(max(0.0, timeout)):
            return False
        self._event.clear()  # the caller re-reads; a later finish sets it again
        return True

    def close(self) -> None:
        self._hub.unsubscribe(self._run_id, self._event)


__all__ = [
    "DONE_CHANNEL",
    "WAKE_CHANNEL",
    "Listener",
    "NotifyBackend",
    "close_done_hubs",
    "notify_on_commit",
]
