"""Moved to ``weft_django.engine.operations``; kept for imports.

The external transitions live in ``operations.stop`` (cancel, suspend,
timeout, purge, retention, force release) and ``operations.wake`` (signal,
async settlement, resume, retry); the engine clock of this process is
``weft_django.clock.process_clock`` (``now_ms``).
"""

from __future__ import annotations

from collections.abc import Callable

from weft_django.clock import now_ms, process_clock
from weft_django.engine.operations import (
    MAX_ATTEMPTS,
    cancel,
    force_release,
    latest_run,
    purge,
    purge_older_than,
    resume,
    retry,
    settle_async,
    signal,
    suspend,
    timeout,
)


def wall_ms() -> int:
    """Moved to ``weft_django.clock.now_ms``; kept for imports."""
    return now_ms()


def use_engine_clock(clock: Callable[[], int] | None) -> None:
    """Install (or, with ``None``, remove every) injected engine clock of this
    process: ``weft_django.clock.process_clock``; kept for imports."""
    if clock is not None:
        process_clock.install(clock)
        return
    while (current := process_clock.current()) is not None:
        process_clock.remove(current)


def engine_clock() -> Callable[[], int] | None:
    """``weft_django.clock.process_clock.current()``; kept for imports."""
    return process_clock.current()


__all__ = [
    "MAX_ATTEMPTS",
    "cancel",
    "engine_clock",
    "force_release",
    "latest_run",
    "now_ms",
    "purge",
    "purge_older_than",
    "resume",
    "retry",
    "settle_async",
    "signal",
    "suspend",
    "timeout",
    "use_engine_clock",
    "wall_ms",
]
