"""``asyncify``: the ``a…`` twin of a sync client function, for async Django views.

Invariant: a twin is not a second implementation. Every write of the client
goes through the one fenced conditional batch, which is synchronous Django
ORM; a twin runs the very same sync function in Django's sync thread
(``sync_to_async(thread_sensitive=True)``, which is how the async ORM itself
runs queries), so the event loop never blocks and there is still exactly one
write path. Each twin is defined next to its sync function.

Transaction semantics: Django has no async ``transaction.atomic`` and
refuses ``ATOMIC_REQUESTS`` for async views. Each awaited twin therefore
runs in autocommit: its batch is its own transaction, committed before the
``await`` returns, and its wakes are sent on that commit. To make a client
call atomic with your own writes, put both in one sync function and await
it: ``await sync_to_async(place_order)()`` where ``place_order`` does
``with transaction.atomic(): Order.objects.create(...); client.start(...)``
(the sync client joins that transaction as a savepoint and sends its wakes
on its commit). ``thread_sensitive=True`` keeps every call of one request on
the same thread, hence the same connection as the request's async ORM calls.

Waits are not twins: ``WorkflowHandle.aresult`` and ``aget_event`` await an
async waiter (``WakeBackend.open_async_done_waiter``) and ``aread_stream`` is an async generator,
so none of them holds a thread while it waits.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Coroutine
from typing import Any, ParamSpec, TypeVar

from asgiref.sync import sync_to_async

P = ParamSpec("P")
T = TypeVar("T")


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


__all__ = ["asyncify"]
