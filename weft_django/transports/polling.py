"""Polling: the always-on backstop, and ``PollingBackend``, the null wake backend.

Why polling is not optional: a wake is a hint, never the truth. Every
engine runs its maintenance pass every ``POLL_INTERVAL`` (``engine.loops``)
whether or not any wake backend is installed, and that pass reads the
durable rows -- due timers, woken and stranded runs, pending runs, stale
claims. So a lost NOTIFY, a dropped message or a backend that failed costs
at most one poll interval, never correctness. Wake backends only make the
next pass come sooner.

``PollingBackend`` delivers nothing; list it alone in ``WEFT["WAKE_BACKENDS"]``
to say explicitly that a deployment relies on polling only (an empty list
means the same).
"""

from __future__ import annotations

from typing import ClassVar

from weft_django.engine.wakes import Wake, WakeBackend


class PollingBackend(WakeBackend):
    """The null backend: wakes are left to the next poll."""

    name: ClassVar[str] = "polling"

    def deliver(self, wake: Wake) -> None:
        return None


__all__ = ["PollingBackend"]
