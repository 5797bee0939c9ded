"""The async seam for "tell me when this run finishes" (``WorkflowHandle.aresult``).

Why a seam of its own: the sync ``DoneWaiter`` of ``engine.wakes`` blocks a
thread, which an async caller must not do on its event loop; an async waiter
has to live on the loop that awaits it. A backend that can announce
finishes asynchronously (``NotifyBackend``: ``LISTEN weft_done`` on a psycopg
``AsyncConnection``) answers ``WakeBackend.open_async_done_waiter``; the
runtime imports no transport. Same invariant as the sync waiter: the waiter is open (the
connection LISTENs) *before* the caller re-reads the row, so a finish is
either in that read or delivered to the waiter.
"""

from __future__ import annotations

from weft_django.engine.wakes import AsyncDoneWaiter, backends


async def open_waiter(using: str, run_id: str) -> AsyncDoneWaiter | None:
    """The first installed backend's async waiter for ``run_id``; ``None`` when
    no installed backend for ``using`` has one (the caller polls)."""
    return await backends.open_async_done_waiter(using, run_id)


__all__ = ["AsyncDoneWaiter", "open_waiter"]
