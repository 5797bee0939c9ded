"""A dropped replay closes a body that yields in ``finally`` without the
"generator ignored GeneratorExit" noise (``sandbox.close_body``)."""

from __future__ import annotations

import gc
import sys
from typing import Any

from weft_django.engine.replay.sandbox import close_body


def _body(ran: list[str]) -> Any:
    try:
        yield "waiting"
    finally:
        ran.append("finally")
        yield "cleanup"  # what a cancel-with-grace cleanup does
        ran.append("after cleanup")


def test_close_body_closes_a_generator_that_yields_in_finally() -> None:
    ran: list[str] = []
    gen = _body(ran)
    assert next(gen) == "waiting"
    close_body(gen)
    assert gen.gi_frame is None  # closed for good
    assert ran == ["finally"]  # its cleanup yield was discarded, nothing after it ran


def test_a_closed_body_reports_nothing_unraisable() -> None:
    seen: list[Any] = []
    previous = sys.unraisablehook
    sys.unraisablehook = seen.append
    try:
        ran: list[str] = []
        gen = _body(ran)
        next(gen)
        close_body(gen)
        del gen
        gc.collect()
    finally:
        sys.unraisablehook = previous
    assert seen == []


def test_close_body_ignores_what_is_not_a_generator() -> None:
    close_body(None)
    close_body(42)
