"""Checks of the values typed on a management command's line, before anything runs.

Why: argparse checks only the type (``--grace nan`` is a float, ``--actor``
any text), so a hostile or mistyped value used to reach the engine or the
database: ``--log-level LOUD`` crashed with a traceback, ``--concurrency 0``
was silently ignored, a NUL in ``--actor`` or a workflow id made PostgreSQL
refuse a write halfway, ``weft_demo --sleep -1`` started an engine (writing
its ``EngineRecord``) before failing. Each command checks its values here
first: a ``CommandError`` naming the option and the value (exit status 1),
and nothing is read, started or written.
"""

from __future__ import annotations

import logging
import math

from django.core.management.base import CommandError

from weft_django.kernel.ids import WORKFLOW_ID_HELP, is_storable_text, is_workflow_id

#: ``%r`` of a typed value is cut here in messages.
SHOWN = 120


def seconds(option: str, value: float, *, positive: bool = False) -> float:
    """A finite number of seconds, non-negative (or positive)."""
    ok = math.isfinite(value) and (value > 0 if positive else value >= 0)
    if not ok:
        kind = "positive" if positive else "non-negative"
        raise CommandError(f"{option} must be a finite, {kind} number of seconds, got {value!r}")
    return value


def count(option: str, value: int, low: int, high: int) -> int:
    """An integer within ``[low, high]``."""
    if not low <= value <= high:
        raise CommandError(f"{option} must be an integer from {low} to {high}, got {value!r}")
    return value


def text(option: str, value: str, max_length: int = 200) -> str:
    """1..``max_length`` characters with no NUL and no lone surrogate."""
    if not value or len(value) > max_length or not is_storable_text(value):
        raise CommandError(
            f"{option} must be 1 to {max_length} characters without NUL, got {value!r:.{SHOWN}}"
        )
    return value


def workflow_id(value: str) -> str:
    if not is_workflow_id(value):
        raise CommandError(f"workflow id {value!r:.{SHOWN}} must match {WORKFLOW_ID_HELP}")
    return value


def log_level(value: str) -> str:
    """A level name ``logging`` knows (``DEBUG``, ``info``, ...)."""
    name = value.upper()
    if not isinstance(logging.getLevelNamesMapping().get(name), int):
        known = ", ".join(sorted(logging.getLevelNamesMapping()))
        raise CommandError(f"--log-level must be one of {known}, got {value!r:.{SHOWN}}")
    return name


__all__ = ["count", "log_level", "seconds", "text", "workflow_id"]
