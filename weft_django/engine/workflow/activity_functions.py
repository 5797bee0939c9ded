"""What ``@activity`` accepts as a function, and the name it gets by default.

Whether an activity is ``async def`` is decided once, here, at decoration:
the executor runs the two kinds on different machinery (threads, one event
loop) and must never guess. A ``functools.partial`` or a ``functools.wraps``
wrapper is judged by the function inside it.
"""

from __future__ import annotations

import functools
import inspect
from typing import Any


def innermost(fn: Any) -> Any:
    """``fn`` without its ``functools.partial`` layers and ``functools.wraps`` wrappers."""
    seen: set[int] = set()
    while id(fn) not in seen:
        seen.add(id(fn))
        if isinstance(fn, functools.partial):
            fn = fn.func
        elif callable(getattr(fn, "__wrapped__", None)):
            fn = fn.__wrapped__
        else:
            break
    return fn


def check_activity_function(fn: object) -> bool:
    """Whether ``fn`` is an ``async def`` function; ``TypeError`` unless it is a function.

    A ``functools.partial`` or a ``functools.wraps`` decorator is judged by
    the function inside it (a plain wrapper around an ``async def`` returns
    its coroutine, so it is async too). A callable object counts by its
    ``__call__``. Classes, generator functions and async generator functions
    are refused: none of them returns the activity's result when called.
    """
    inner = innermost(fn)
    if not callable(fn) or inspect.isclass(fn) or inspect.isclass(inner):
        raise TypeError(f"@activity needs a function or an async def function, got {fn!r:.200}")
    candidates: list[Any] = [fn, inner]
    if not inspect.isroutine(inner):
        candidates.append(getattr(inner, "__call__", None))  # noqa: B004 - callable objects
    if any(inspect.isgeneratorfunction(f) or inspect.isasyncgenfunction(f) for f in candidates):
        raise TypeError(
            "@activity needs a function or an async def function, got the generator "
            f"function {fn!r:.200} (a generator does not return the activity's result)"
        )
    return any(inspect.iscoroutinefunction(f) for f in candidates)


def default_name(fn: Any) -> str:
    """``module.qualname`` of the function inside any partial or wrapper."""
    inner = innermost(fn)
    module = getattr(inner, "__module__", None) or getattr(fn, "__module__", "")
    qualname = getattr(inner, "__qualname__", None) or type(inner).__qualname__
    return f"{module}.{qualname}"


__all__ = ["check_activity_function", "default_name", "innermost"]
