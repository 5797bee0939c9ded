"""A helper module an activity raises from, two calls deep (not a test module).

The line numbers of the raises are read by the tests (``RAISE_LINE``), so
moving code here moves nothing in the tests.
"""

from __future__ import annotations

import inspect


class PaymentDeclined(Exception):
    """The card issuer said no."""


def charge(card: str) -> None:
    authorise(card)


def authorise(card: str) -> None:
    raise PaymentDeclined(f"card {card} declined by the issuer")


RAISE_LINE = inspect.getsourcelines(authorise)[1] + 1


class Unpicklable(Exception):
    """An exception carrying a lock (cannot be pickled) whose ``str`` raises."""

    def __init__(self) -> None:
        import threading

        super().__init__("unpicklable")
        self.lock = threading.Lock()

    def __str__(self) -> str:
        raise RuntimeError("no text for you")


def recurse(depth: int) -> int:
    """Ping-pong recursion: no two frames in a row alike, so Python's traceback
    does not fold them ("Previous line repeated"): a huge traceback."""
    return _pong(depth + 1) + 1


def _pong(depth: int) -> int:
    return recurse(depth + 1) + 1
