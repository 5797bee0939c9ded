"""Human text for engine-clock times and durations (admin, ``weft_status``).

The admin and ``weft_status`` print the same timestamps and ages through these two
functions, so the two surfaces read alike.
"""

from __future__ import annotations

import datetime as dt


def format_ms(ms: int | None) -> str:
    """An engine-clock ms timestamp as UTC text with ms precision (``-`` for none)."""
    if ms is None:
        return "-"
    try:
        moment = dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC)
    except (OverflowError, OSError, ValueError):
        return f"{ms} ms"
    return moment.strftime("%Y-%m-%d %H:%M:%S.") + f"{moment.microsecond // 1000:03d} UTC"


def format_age(seconds: float | None) -> str:
    """A short human duration (``"4.2 s"``, ``"3 min"``, ``"2.5 h"``, ``"3 d"``)."""
    if seconds is None:
        return "-"
    sign = "-" if seconds < 0 else ""
    s = abs(seconds)
    if s < 60:
        text = f"{s:.1f} s"
    elif s < 3600:
        text = f"{s / 60:.0f} min"
    elif s < 86400:
        text = f"{s / 3600:.1f} h"
    else:
        text = f"{s / 86400:.1f} d"
    return sign + text


__all__ = ["format_age", "format_ms"]
