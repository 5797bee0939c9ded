"""Which declared type a value handed to a body is rebuilt as, during a replay.

The invariant protected: a body sees the same typed value live and on replay,
because both paths rebuild it here from the same stored JSON with the same
rebuild (``engine.workflow.payload_types``), looked up from the code that
declared it: an activity's return annotation, a child workflow's, a
``wait_for_signal(type=)``, an update or query handler's annotations. A
stored value that no longer fits raises ``PayloadTypeMismatch`` (a
``NonDeterminismError``: the run is suspended, not failed), naming the value,
its journal position and the field.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

from weft_django.engine.workflow.declared import parameter_annotations, return_annotation
from weft_django.engine.workflow.payload_types import (
    Rebuild,
    RebuildError,
    rebuilder,
)
from weft_django.errors import PayloadTypeMismatch

_HANDLERS: dict[Any, tuple[list[Rebuild | None], Rebuild | None]] = {}


def result_rebuild(command: object) -> Rebuild | None:
    """How the outcome of leaf ``command`` is rebuilt (``None``: as stored): what
    the command carries, decided where the body built it (``ctx.run`` from the
    activity's annotation, ``ctx.start_child`` from the child's,
    ``wait_for_signal(type=)``)."""
    return getattr(command, "rebuild", None)


def rebuilt(
    rebuild: Rebuild,
    value: Any,
    *,
    workflow_id: str,
    position: int,
    what: str,
    none_ok: bool = False,
) -> Any:
    """``value`` rebuilt, or ``PayloadTypeMismatch`` naming ``what`` and the field.
    ``none_ok``: ``None`` stays ``None`` (a signal wait that timed out)."""
    if value is None and none_ok:
        return None
    try:
        return rebuild(value, "")
    except RebuildError as exc:
        raise PayloadTypeMismatch(
            workflow_id, position, what, f"{exc.path}: {exc.reason}"
        ) from None


def handler_rebuilds(
    fn: Callable[..., Any], where: str
) -> tuple[list[Rebuild | None], Rebuild | None]:
    """How a handler's arguments and result are rebuilt, from its annotations
    (``TypeError`` naming one that cannot be); computed once per function code."""
    key = getattr(fn, "__code__", fn)
    try:
        return _HANDLERS[key]
    except (KeyError, TypeError):
        pass
    params = parameter_annotations(fn)
    args = [rebuilder(p, f"{where} argument {i}") for i, p in enumerate(params)]
    made = (args, rebuilder(return_annotation(fn), f"{where} result"))
    with contextlib.suppress(TypeError):  # an unhashable key: computed each time
        _HANDLERS[key] = made
    return made


def rebuilt_args(fn: Callable[..., Any], where: str, args: list[Any]) -> list[Any]:
    """``args`` rebuilt as ``fn`` declares them (``RebuildError`` on a misfit)."""
    parts, _ = handler_rebuilds(fn, where)
    if not any(part is not None for part in parts):
        return args
    out = list(args)
    for index, value in enumerate(args):
        part = parts[index] if index < len(parts) else None
        if part is not None:
            out[index] = part(value, f"argument {index}")
    return out


__all__ = ["handler_rebuilds", "rebuilt", "rebuilt_args", "result_rebuild"]
