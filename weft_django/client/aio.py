"""The async client: ``a…`` twins of ``client``, for async Django views under ASGI.

Why twins and not a second implementation: every write of the client goes
through the one fenced conditional batch, and that path is synchronous
Django ORM. A twin runs the very same sync function in Django's sync thread
(``asyncify``: ``sync_to_async(thread_sensitive=True)``, which is how the
async ORM itself runs queries), so the event loop never blocks and there is
still exactly one write path.

Transaction semantics (precisely): Django has no async ``transaction.atomic``
and refuses ``ATOMIC_REQUESTS`` for async views. Each awaited twin therefore
runs in autocommit: its batch is its own transaction, committed before the
``await`` returns, and its wakes are sent on that commit. To make a client
call atomic with your own writes, put both in one sync function and await
it: ``await sync_to_async(place_order)()`` where ``place_order`` does
``with transaction.atomic(): Order.objects.create(...); client.start(...)``
(the sync client joins that transaction as a savepoint and sends its wakes
on its commit). ``thread_sensitive=True`` keeps every call of one request on
the same thread, hence the same connection as the request's async ORM calls.

Waits never block the loop: ``WorkflowHandle.aresult`` opens an async
waiter (``engine.adone``: on PostgreSQL a ``LISTEN weft_done`` on a psycopg
``AsyncConnection``, one per event loop) *before* it reads the row, reads,
and only then awaits the announcement -- re-reading at least every second,
since a wake is a hint and the row is the truth. Without such a backend it
polls with ``asyncio.sleep`` (10 ms doubling to 1 s).

Adding a twin (``aupdate``, ``aget_event``, ...): a sync client function
gets one line in ``client.py``, ``aname = asyncify(name)``; a wait gets an
``async def`` here built like ``aresult`` (open the waiter, read, await);
an async iterator (``aread_stream``) is an ``async def`` generator here.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Callable, Coroutine
from typing import Any, ParamSpec, TypeVar

from asgiref.sync import sync_to_async

from weft_django.conf import get_settings
from weft_django.engine import adone
from weft_django.errors import WorkflowFailedError, WorkflowNotFound
from weft_django.models import TERMINAL_STATUSES, WorkflowRun

P = ParamSpec("P")
T = TypeVar("T")

#: The longest an ``aresult`` waits on an announcement before re-reading the row.
REREAD_S = 1.0


def asyncify(fn: Callable[P, T]) -> Callable[P, Coroutine[Any, Any, T]]:
    """The ``a…`` twin of sync client function ``fn``: same signature (``inspect``
    follows ``__wrapped__``), same errors, run in Django's sync thread."""
    run = sync_to_async(fn, thread_sensitive=True)

    @functools.wraps(fn)
    async def twin(*args: P.args, **kwargs: P.kwargs) -> T:
        return await run(*args, **kwargs)

    twin.__name__ = f"a{fn.__name__}"
    twin.__qualname__ = f"a{fn.__qualname__}"
    twin.__doc__ = f"Async twin of ``client.{fn.__name__}`` (awaitable, same arguments).\n\n" + (
        fn.__doc__ or ""
    )
    return twin


class AsyncHandleMethods:
    """``WorkflowHandle``'s async methods (a mixin: the handle's fields are its own)."""

    workflow_id: str
    run_id: str

    async def _arun(self, run_id: str | None = None) -> WorkflowRun:
        manager = WorkflowRun.objects.using(get_settings().database)
        run = await manager.filter(pk=run_id or self.run_id).afirst()
        if run is None:
            raise WorkflowNotFound(self.workflow_id)
        return run

    async def astatus(self) -> str:
        return (await self._arun()).status

    async def aerror(self) -> Any:
        return (await self._arun()).error

    async def _afollow(self, run: WorkflowRun) -> WorkflowRun:
        """Follow ``continue_as_new`` to the run that carries on."""
        manager = WorkflowRun.objects.using(get_settings().database)
        while (
            run.status == "completed"
            and isinstance(run.result, dict)
            and "continued_as_new" in run.result
        ):
            nxt = await manager.filter(pk=run.result["continued_as_new"]).afirst()
            if nxt is None:
                break
            run = nxt
        return run

    async def aresult(self, timeout: float | None = 30.0) -> Any:
        """``result()`` without blocking the loop: the result;
        ``WorkflowFailedError`` if the run ended otherwise; ``TimeoutError``."""
        deadline = None if timeout is None else time.monotonic() + timeout
        db = get_settings().database
        delay = 0.01
        waiter = await adone.open_waiter(db, self.run_id)  # before the first read
        watched = self.run_id
        try:
            while True:
                run = await self._afollow(await self._arun())
                if run.status == "completed":
                    return run.result
                if run.status in TERMINAL_STATUSES:
                    raise WorkflowFailedError(self.workflow_id, run.status, run.error)
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    raise TimeoutError(
                        f"workflow {self.workflow_id!r} is still {run.status} after {timeout} s"
                    )
                if watched != str(run.pk):  # continued as new: watch the run that carries on
                    if waiter is not None:
                        await waiter.close()
                    waiter, watched = await adone.open_waiter(db, str(run.pk)), str(run.pk)
                    if waiter is not None:
                        continue  # subscribed: read the row once more, then wait
                if waiter is not None:
                    await waiter.wait(REREAD_S if remaining is None else min(REREAD_S, remaining))
                else:
                    await asyncio.sleep(delay if remaining is None else min(delay, remaining))
                    delay = min(delay * 2, 1.0)
        finally:
            if waiter is not None:
                await waiter.close()


__all__ = ["REREAD_S", "AsyncHandleMethods", "asyncify"]
