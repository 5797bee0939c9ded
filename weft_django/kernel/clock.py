"""The one clock: integer milliseconds, and the engine clock as an object.

Every comparison of the claim protocol (expiry, due timers, ``start_after``) uses the same
time base (SPEC §4.4 "Times are the engine clock"). ``wall_ms()`` is the wall clock.
``EngineClock`` is what an engine reads; a test injects a fake one. ``now_ms()`` is what
code outside an engine (the client, the external transitions) reads: the wall clock, unless
an engine of this process booted with an injected clock, so that client-side times compare
with that engine's timers and claims.

This module imports nothing of weft_django, so every layer may use it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

Clock = Callable[[], int]
"""A zero-argument callable returning integer milliseconds."""


def wall_ms() -> int:
    """The wall clock in integer milliseconds since the epoch."""
    return time.time_ns() // 1_000_000


class _ProcessClock:
    """The clock of the engine that booted in this process, if injected.

    One object owns the process-wide choice, so a second engine in the same
    process cannot silently replace the first one's clock: ``install`` keeps
    a stack and ``remove`` takes off only the clock it is given.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._stack: list[Clock] = []

    def install(self, clock: Clock) -> None:
        with self._lock:
            self._stack.append(clock)

    def remove(self, clock: Clock) -> None:
        with self._lock:
            for index in range(len(self._stack) - 1, -1, -1):
                if self._stack[index] is clock:
                    del self._stack[index]
                    return

    def installed(self) -> tuple[Clock, ...]:
        """The installed clocks, oldest first (a test fixture saves them)."""
        with self._lock:
            return tuple(self._stack)

    def restore(self, clocks: tuple[Clock, ...]) -> None:
        """Put back exactly ``clocks`` (what ``installed()`` returned)."""
        with self._lock:
            self._stack = list(clocks)

    def current(self) -> Clock | None:
        with self._lock:
            return self._stack[-1] if self._stack else None

    def now_ms(self) -> int:
        clock = self.current()
        return int(clock()) if clock is not None else wall_ms()


process_clock = _ProcessClock()


def now_ms() -> int:
    """Now on the engine clock of this process (the wall clock unless injected)."""
    return process_clock.now_ms()


__all__ = ["Clock", "now_ms", "process_clock", "wall_ms"]
