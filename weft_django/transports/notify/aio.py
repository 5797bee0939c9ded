"""Async ``LISTEN weft_done`` for ``WorkflowHandle.aresult`` (psycopg ``AsyncConnection``).

Why not the sync hub of ``transports.notify``: its waiters are
``threading.Event``s that block a thread. Here one ``AsyncConnection`` per
event loop (per process, database alias and database name) LISTENs, a
reader task on that loop sets ``asyncio.Event``s, and a waiter awaits its
event -- the loop keeps serving other requests meanwhile.

Invariant (as the sync hub's): ``subscribe`` returns only while the
connection LISTENs, so a finish committed after it is delivered. When the
connection is lost every waiter is set (its caller re-reads the row) and the
next ``subscribe`` opens a new connection; the connection closes when its
loop ends (the reader task is cancelled). Opened through
``NotifyBackend.open_async_done_waiter``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import weakref
from typing import Any

from django.db import connections

from weft_django.engine.wakes import AsyncDoneWaiter

logger = logging.getLogger("weft_django.transports")

#: Same channel as ``transports.notify.DONE_CHANNEL`` (payload: the run id).
DONE_CHANNEL = "weft_done"
#: The ``WakeBackend.name`` this serves (``transports.notify.NotifyBackend``).

_HubKey = tuple[int, str, str]
_hubs: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[_HubKey, _AsyncDoneHub]] = (
    weakref.WeakKeyDictionary()
)
_locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = (
    weakref.WeakKeyDictionary()
)


class _AsyncDoneHub:
    """One loop's ``LISTEN weft_done`` connection and its waiters."""

    def __init__(self, using: str, key: _HubKey) -> None:
        self.using = using
        self.key = key
        self.alive = False
        self._waiters: dict[str, set[asyncio.Event]] = {}
        self._conn: Any = None
        self._task: asyncio.Task[None] | None = None

    async def open(self) -> None:
        import psycopg
        from psycopg import sql

        params = connections[self.using].get_connection_params()
        for private in ("cursor_factory", "context", "prepare_threshold", "server_side_binding"):
            params.pop(private, None)
        conn = await psycopg.AsyncConnection.connect(autocommit=True, **params)
        try:
            await conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(DONE_CHANNEL)))
        except BaseException:
            await conn.close()
            raise
        self._conn, self.alive = conn, True
        self._task = asyncio.get_running_loop().create_task(self._read(), name="weft-async-done")

    async def _read(self) -> None:
        try:
            async for note in self._conn.notifies():
                for event in list(self._waiters.get(note.payload, ())):
                    event.set()
        except Exception:
            logger.warning("async LISTEN %s lost; the next wait reconnects", DONE_CHANNEL)
        finally:
            self.alive = False
            for group in self._waiters.values():  # they re-read the row
                for event in group:
                    event.set()
            with contextlib.suppress(Exception):
                await self._conn.close()

    def subscribe(self, run_id: str) -> _AsyncWaiter:
        event = asyncio.Event()
        self._waiters.setdefault(run_id, set()).add(event)
        return _AsyncWaiter(self, run_id, event)

    def unsubscribe(self, run_id: str, event: asyncio.Event) -> None:
        group = self._waiters.get(run_id)
        if group is not None:
            group.discard(event)
            if not group:
                del self._waiters[run_id]

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(BaseException):
                await self._task


class _AsyncWaiter:
    def __init__(self, hub: _AsyncDoneHub, run_id: str, event: asyncio.Event) -> None:
        self._hub = hub
        self._run_id = run_id
        self._event = event

    async def wait(self, timeout: float) -> bool:
        try:
            await asyncio.wait_for(self._event.wait(), max(0.0, timeout))
        except TimeoutError:
            return False
        self._event.clear()  # the caller re-reads; a later finish sets it again
        return True

    async def close(self) -> None:
        self._hub.unsubscribe(self._run_id, self._event)


async def _hub(using: str) -> _AsyncDoneHub:
    loop = asyncio.get_running_loop()
    key = (os.getpid(), using, str(connections[using].settings_dict.get("NAME")))
    lock = _locks.setdefault(loop, asyncio.Lock())
    async with lock:
        hubs = _hubs.setdefault(loop, {})
        hub = hubs.get(key)
        if hub is None or not hub.alive:
            hub = _AsyncDoneHub(using, key)
            await hub.open()  # LISTENing before the first subscriber returns
            hubs[key] = hub
        return hub


async def open_done_waiter(using: str, run_id: str) -> AsyncDoneWaiter | None:
    """An async waiter for ``run_id``'s finish on this loop's shared connection;
    ``None`` when it cannot connect (the caller polls: a wake is only a hint)."""
    try:
        hub = await _hub(using)
    except Exception:
        logger.warning("async LISTEN %s failed; polling", DONE_CHANNEL, exc_info=True)
        return None
    return hub.subscribe(run_id)


async def aclose_done_hubs() -> None:
    """Close the running loop's connections (a test's or a server's shutdown)."""
    hubs = _hubs.pop(asyncio.get_running_loop(), {})
    for hub in hubs.values():
        await hub.close()


__all__ = ["DONE_CHANNEL", "aclose_done_hubs", "open_done_waiter"]
