"""What a function declares: its parameter and result annotations, resolved.

Read once where a function is declared (``@workflow``, ``@activity``, a
handler), so the replay never inspects code on its hot path. An annotation
that cannot be resolved yet (a forward reference to a class defined later)
reads as ``Any``: the value is then handed over as stored.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable
from typing import Any


def return_annotation(fn: Callable[..., Any]) -> Any:
    """``fn``'s declared result: ``R`` of ``-> R``, of a generator's
    ``Generator[Any, Any, R]`` and of an ``async def``; ``Any`` when not declared
    or not resolvable yet."""
    hints = _hints(fn)
    annotation = hints.get("return", Any)
    origin = typing.get_origin(annotation)
    if origin is not None and getattr(origin, "__name__", "") in ("Generator", "Coroutine"):
        args = typing.get_args(annotation)
        return args[2] if len(args) == 3 else Any
    return annotation


def parameter_annotations(fn: Callable[..., Any]) -> list[Any]:
    """The declared types of ``fn``'s positional parameters (``Any`` when not declared)."""
    hints = _hints(fn)
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return []
    return [
        hints.get(p.name, Any)
        for p in params
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL)
    ]


def _hints(fn: Callable[..., Any]) -> dict[str, Any]:
    try:
        return typing.get_type_hints(fn, include_extras=False)
    except Exception:
        return {}


__all__ = ["parameter_annotations", "return_annotation"]
