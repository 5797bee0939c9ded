"""What an ``async def`` body may await: ctx commands, and nothing else.

A coroutine body is driven by the replay exactly like a generator body
(``send``/``throw``/``close``): each ctx command's ``__await__`` yields the
command itself once and returns what the replay sends back, so ``await
ctx.run(...)`` and ``yield ctx.run(...)`` reach the same replay loop.

The invariant protected: nothing but a journaled command may suspend a body,
live or on replay. While a coroutine body is stepped, the thread's running
event loop is ``BODY_LOOP`` (``stepping``), a loop that can do nothing: the
first thing a foreign awaitable asks of it (``asyncio.sleep`` wants a future,
``asyncio.gather`` a task) raises a ``TypeError`` naming that awaitable and
the ctx command to use instead, inside the body, where the ``await`` is.
A foreign awaitable that suspends without asking the loop (``asyncio.sleep(0)``,
another library's future) reaches the replay as a yield that is not a command,
and the replay throws the same ``TypeError`` into the body there
(``foreign_await_error``). Both happen at the same point live and on replay,
and neither records anything. ``BODY_LOOP`` runs only while the body's own code
does: with it running, Django's connections would resolve to another
(async-context) set, so the replay's code and the database refusal run
without it, and an ORM call in the body meets Django's own async refusal.

Conversely a ctx command awaited outside a workflow body -- in an ordinary
asyncio program, a view, a test -- reaches that program's event loop, which
throws its "bad yield" back at the ``await``; the command's ``__await__``
turns it into a ``RuntimeError`` saying so (``refuse_outside_body``).
"""

from __future__ import annotations

import contextlib
import sys
from asyncio import events
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any

#: What to await instead of each asyncio function (by its name).
_INSTEAD = {
    "sleep": "ctx.sleep",
    "gather": "ctx.all",
    "wait": "ctx.race (or ctx.all)",
    "wait_for": "ctx.race with ctx.sleep for the timeout",
    "as_completed": "ctx.race",
    "timeout": "ctx.race with ctx.sleep for the timeout",
    "to_thread": "ctx.run with an @activity",
    "run_in_executor": "ctx.run with an @activity",
    "create_task": "ctx.all",
    "ensure_future": "ctx.all",
    "shield": "ctx.run",
}


def _message(name: str) -> str:
    short = name.rsplit(".", 1)[-1]
    instead = _INSTEAD.get(short, "ctx.run with an @activity (or another ctx command)")
    return (
        f"a workflow body awaited {name}, which is not a ctx command: await {instead} "
        "instead. A body is replayed from its journal, and only ctx commands are recorded "
        "there."
    )


def _asyncio_caller(frame: FrameType | None) -> str:
    """The outermost asyncio function on the stack above ``frame`` (``asyncio.gather``)."""
    found = ""
    while frame is not None:
        module = frame.f_globals.get("__name__", "")
        if module == "asyncio" or module.startswith("asyncio."):
            found = f"asyncio.{frame.f_code.co_name}"
        elif found:
            break
        frame = frame.f_back
    return found or "an awaitable that needs an asyncio event loop"


class _BodyLoop:
    """The running loop of a body being stepped: every use is refused."""

    def __getattr__(self, name: str) -> Any:
        def refuse(*args: Any, **kwargs: Any) -> Any:
            for arg in args:  # a coroutine handed to create_task: close it quietly
                close = getattr(arg, "close", None)
                if close is not None and hasattr(arg, "cr_code"):
                    close()
            raise TypeError(_message(_asyncio_caller(sys._getframe(1))))

        return refuse

    def __repr__(self) -> str:
        return "<weft workflow body: no event loop>"


BODY_LOOP: Any = _BodyLoop()


def as_body(action: Callable[[], Any]) -> Any:
    """``action()`` (one ``send``/``throw`` of a coroutine body) with ``BODY_LOOP``
    running. Only around the body's own code: Django's thread-critical locals
    (its connections) take a running loop for an async context, so the
    replay's own code must run without it."""
    before = events._get_running_loop()
    events._set_running_loop(BODY_LOOP)
    try:
        return action()
    finally:
        events._set_running_loop(before)


@contextlib.contextmanager
def stepping() -> Iterator[None]:
    """Step a coroutine body (or update handler) with ``BODY_LOOP`` running."""
    before = events._get_running_loop()
    events._set_running_loop(BODY_LOOP)
    try:
        yield
    finally:
        events._set_running_loop(before)


def require_body(command: object) -> None:
    """``RuntimeError`` unless ``command`` is awaited inside a workflow body."""
    if events._get_running_loop() is not BODY_LOOP:
        refuse_outside_body(command)


def is_foreign_driver_error(exc: BaseException) -> bool:
    """Whether ``exc`` is an event loop refusing a yielded ctx command (asyncio's
    task: "Task got bad yield"): the command was awaited outside a workflow body."""
    return "bad yield" in str(exc)


def refuse_outside_body(command: object) -> None:
    """The ``RuntimeError`` of a ctx command awaited outside a workflow body."""
    describe = getattr(command, "describe", None)
    what = describe() if callable(describe) else type(command).__name__
    raise RuntimeError(
        f"a ctx command ({what}) was awaited outside a workflow body: ctx commands "
        "only run inside an @workflow body driven by weft (start the workflow with "
        "client.start; an activity cannot await ctx commands)"
    )


def _awaited_name(coro: Any) -> str:
    """The foreign awaitable a body is suspended in, by name (deepest named)."""
    name = ""
    node = coro
    for _ in range(64):
        inner = getattr(node, "cr_await", None)
        if inner is None:
            inner = getattr(node, "gi_yieldfrom", None)
        if inner is None:
            break
        code = getattr(inner, "cr_code", None) or getattr(inner, "gi_code", None)
        frame = getattr(inner, "cr_frame", None) or getattr(inner, "gi_frame", None)
        if code is not None:
            module = frame.f_globals.get("__name__", "") if frame is not None else ""
            if module.startswith("asyncio"):
                return f"asyncio.{code.co_name}"
            name = f"{module}.{code.co_qualname}" if module else code.co_qualname
        else:
            name = type(inner).__qualname__
        node = inner
    return name or "an awaitable that is not a ctx command"


def foreign_await_error(coro: Any, yielded: Any) -> TypeError:
    """The error thrown into a body that suspended on something else than a command."""
    name = _awaited_name(coro)
    if yielded is not None and name == "an awaitable that is not a ctx command":
        name = f"{type(yielded).__qualname__} {yielded!r:.80}"
    return TypeError(_message(name))


def is_coroutine(body: Any) -> bool:
    """Whether ``body`` (what a workflow function or handler returned) is a coroutine."""
    return hasattr(body, "cr_code")


__all__ = [
    "BODY_LOOP",
    "as_body",
    "foreign_await_error",
    "is_coroutine",
    "is_foreign_driver_error",
    "refuse_outside_body",
    "require_body",
    "stepping",
]
