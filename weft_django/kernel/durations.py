"""The one duration parser: seconds or ``timedelta`` to integer milliseconds.

Settings, ``@activity(timeout=)``, ``ctx.sleep``/``ctx.*`` timeouts and
``client.start(start_after=)`` all parse durations here, so a bad value is refused the same
way wherever it is given: a bool, a non-number, NaN, an infinity, a negative (or, where
refused, zero) duration is a ``ValueError`` or ``TypeError`` that names the argument and
the value.
"""

from __future__ import annotations

import math
from datetime import timedelta

Duration = timedelta | float | int


def to_ms(
    value: object,
    what: str,
    *,
    allow_zero: bool = True,
    type_error: type[Exception] = TypeError,
) -> int:
    """``value`` (seconds, or a ``timedelta``) as integer milliseconds.

    ``what`` names the argument in the error (``"ctx.sleep duration"``,
    ``"WEFT['CLAIM_TTL']"``). ``allow_zero=False`` refuses durations that
    round to 0 ms. ``type_error`` is the class raised for a value that is not
    a duration at all (settings raise ``ValueError`` for everything).
    """
    if isinstance(value, bool) or not isinstance(value, int | float | timedelta):
        raise type_error(f"{what} must be a timedelta or a number of seconds, got {value!r}")
    seconds = value.total_seconds() if isinstance(value, timedelta) else float(value)
    if math.isnan(seconds) or math.isinf(seconds):
        raise ValueError(f"{what} must be a finite duration, got {value!r}")
    if seconds < 0:
        kind = "non-negative" if allow_zero else "positive"
        raise ValueError(f"{what} must be a {kind} duration, got {value!r}")
    ms = round(seconds * 1000)
    if ms == 0 and not allow_zero:
        raise ValueError(f"{what} must be a positive duration, got {value!r}")
    return ms


def optional_ms(value: object, what: str, *, allow_zero: bool = True) -> int | None:
    """``to_ms`` that passes ``None`` through (an absent timeout)."""
    if value is None:
        return None
    return to_ms(value, what, allow_zero=allow_zero)


__all__ = ["Duration", "optional_ms", "to_ms"]
