"""The engine clock of tests: integer milliseconds that move only when told to.

The test kit's ``WorkflowTestEnvironment`` and this repository's own suite share this fake
clock (``tests.support.ManualClock`` subclasses it), and ``advance`` takes durations
through the one parser, ``kernel.durations.to_ms``, so a test's durations are read as the
engine reads them.
"""

from __future__ import annotations

from datetime import timedelta

from weft_django.kernel.durations import to_ms


class FakeClock:
    """An integer-ms clock that moves only when told to: the engine clock of tests.

    Callable like every engine clock (``Clock`` in ``weft_django.kernel.clock``);
    ``now`` is the current value and may be assigned directly.
    """

    def __init__(self, start_ms: int = 1_700_000_000_000) -> None:
        self.now = int(start_ms)

    def __call__(self) -> int:
        return self.now

    def advance(self, duration: timedelta | float) -> int:
        """Move forward by ``duration`` (a ``timedelta`` or seconds); returns the new ms."""
        return self.advance_ms(to_ms(duration, "FakeClock.advance duration"))

    def advance_ms(self, ms: int) -> int:
        """Move by ``ms`` integer milliseconds (negative moves back); returns the new ms."""
        self.now += int(ms)
        return self.now

    def set_ms(self, ms: int) -> int:
        """Jump to ``ms``; returns it."""
        self.now = int(ms)
        return self.now


__all__ = ["FakeClock"]
