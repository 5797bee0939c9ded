"""One renewal pass at a time, and a release waits for the pass in flight.

Why: a renewal pass writes new ``expires_at`` values and then refreshes the
registry's cache of the exact holder columns; a release compares on those
columns. A release that began while a pass was in flight must therefore wait
for the pass to finish, or it would compare on the columns the pass is
replacing and lose a race against its own engine. A ``threading.Condition``
makes the wait observable: ``waiting`` counts the releases blocked on it, so
a test (or a diagnostic) can see a release waiting rather than infer it from
a thread that is merely slow.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager


class RenewalGate:
    """Serialises renewal passes; ``wait_idle()`` blocks while one is in flight."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._in_flight = False
        self._waiting = 0

    @contextmanager
    def renewal_pass(self) -> Iterator[None]:
        """Hold the gate for one pass (a second pass waits for the first)."""
        with self._changed:
            while self._in_flight:
                self._changed.wait()
            self._in_flight = True
        try:
            yield
        finally:
            with self._changed:
                self._in_flight = False
                self._changed.notify_all()

    def wait_idle(self) -> None:
        """Return once no renewal pass is in flight (at once when none is)."""
        with self._changed:
            if not self._in_flight:
                return
            self._waiting += 1
            self._changed.notify_all()  # a watcher of ``waiting`` sees this waiter
            try:
                while self._in_flight:
                    self._changed.wait()
            finally:
                self._waiting -= 1

    @property
    def in_flight(self) -> bool:
        with self._changed:
            return self._in_flight

    @property
    def waiting(self) -> int:
        """How many callers are blocked in ``wait_idle()`` right now."""
        with self._changed:
            return self._waiting

    def wait_for_waiters(self, count: int = 1, timeout: float | None = None) -> bool:
        """Block until at least ``count`` callers wait in ``wait_idle()``;
        ``False`` on timeout."""
        with self._changed:
            return self._changed.wait_for(lambda: self._waiting >= count, timeout)
