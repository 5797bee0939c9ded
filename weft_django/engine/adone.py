"""The async seam for "tell me when this run finishes" (``WorkflowHandle.aresult``).

Why a seam of its own: the sync ``DoneWaiter`` of ``engine.wakes`` blocks a
thread, which an async caller must not do on its event loop; an async waiter
has to live on the loop that awaits it. A transport that can announce
finishes asynchronously (``transports.anotify``: ``LISTEN weft_done`` on a
psycopg ``AsyncConnection``) registers a factory here under the ``name`` of
the ``WakeBackend`` it serves; the runtime imports no transport, only this
registry. Same invariant as the sync waiter: the waiter is open (the
connection LISTENs) *before* the caller re-reads the row, so a finish is
either in that read or delivered to the waiter.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol

from weft_django.engine.wakes import backends


class AsyncDoneWaiter(Protocol):
    """One caller's open subscription to a run's "finished" announcements."""

    async def wait(self, timeout: float) -> bool:
        """Wait up to ``timeout`` s without blocking the loop; ``True`` when announced."""
        ...

    async def close(self) -> None: ...


#: ``(using, run_id) -> waiter``, or ``None`` when it cannot listen now (the caller polls).
AsyncDoneFactory = Callable[[str, str], Awaitable[AsyncDoneWaiter | None]]

_factories: dict[str, AsyncDoneFactory] = {}


def register(backend_name: str, factory: AsyncDoneFactory) -> None:
    """Let the installed backend called ``backend_name`` serve async waits."""
    _factories[backend_name] = factory


async def open_waiter(using: str, run_id: str) -> AsyncDoneWaiter | None:
    """The first installed backend's async waiter for ``run_id``; ``None`` when
    no installed backend for ``using`` has one (the caller polls)."""
    for backend in backends.for_alias(using):
        factory = _factories.get(backend.name)
        if backend.supports_wait_done and factory is not None:
            return await factory(using, run_id)
    return None


__all__ = ["AsyncDoneFactory", "AsyncDoneWaiter", "open_waiter", "register"]
