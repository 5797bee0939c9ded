"""One way to show a time to a person: the project's time zone, seconds, a relative form.

Every instant a person reads -- the admin, the CLI's human output, the demo,
a wait's sentence -- goes through ``format_instant`` (or ``format_ms`` for
engine-clock milliseconds), so no page shows epoch milliseconds, and all
show the same zone (``settings.TIME_ZONE`` through ``django.utils.timezone``)
with second precision. Durations go through ``format_age``; "in 2 h" /
"3 min ago" through ``relative``. Machines (the API's JSON, ``--json``) get
ISO 8601 (``iso``), never these texts.
"""

from __future__ import annotations

import datetime as dt

from django.utils import timezone

from weft_django.kernel.clock import wall_ms


def to_datetime(value: dt.datetime | int | float | None) -> dt.datetime | None:
    """An aware datetime for a datetime or engine-clock milliseconds (``None``
    for none, or for milliseconds no calendar can show)."""
    if value is None:
        return None
    if isinstance(value, dt.datetime):
        return value if timezone.is_aware(value) else value.replace(tzinfo=dt.UTC)
    try:
        return dt.datetime.fromtimestamp(value / 1000, tz=dt.UTC)
    except (OverflowError, OSError, ValueError):
        return None


def iso(value: dt.datetime | int | float | None) -> str | None:
    """ISO 8601 in UTC with milliseconds (``...Z``), for machines; ``None`` stays ``None``."""
    moment = to_datetime(value)
    if moment is None:
        return None
    return moment.astimezone(dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def local_clock(value: dt.datetime | int | float | None) -> str:
    """Only the time of day in the project's zone (``19:24:33``), ``-`` for none."""
    moment = to_datetime(value)
    return "-" if moment is None else timezone.localtime(moment).strftime("%H:%M:%S")


def format_instant(
    value: dt.datetime | int | float | None,
    *,
    relative_to: int | None = None,
    with_relative: bool = False,
) -> str:
    """``2026-12-07 19:24:33 CET``, in the project's time zone, to the second;
    with ``with_relative``, followed by ``(in 2 h)`` / ``(3 min ago)`` measured
    from ``relative_to`` (engine-clock ms; default: now). ``-`` for none."""
    if value is None:
        return "-"
    moment = to_datetime(value)
    if moment is None:
        return f"{value} (not a calendar time)"
    local = timezone.localtime(moment)
    text = local.strftime("%Y-%m-%d %H:%M:%S %Z").rstrip()
    if with_relative:
        now = wall_ms() if relative_to is None else relative_to
        text += f" ({relative((moment.timestamp() * 1000 - now) / 1000)})"
    return text


def format_ms(ms: int | None, *, with_relative: bool = False) -> str:
    """Engine-clock milliseconds as ``format_instant`` shows them."""
    return format_instant(ms, with_relative=with_relative)


def relative(seconds: float) -> str:
    """``"in 2 h"`` for a time ahead, ``"3 min ago"`` for one behind, ``"now"``."""
    if abs(seconds) < 1:
        return "now"
    text = format_age(abs(seconds))
    return f"in {text}" if seconds > 0 else f"{text} ago"


def format_age(seconds: float | None) -> str:
    """A short human duration (``"40 ms"``, ``"4.2 s"``, ``"3 min"``, ``"2.5 h"``, ``"3 d"``)."""
    if seconds is None:
        return "-"
    sign = "-" if seconds < 0 else ""
    s = abs(seconds)
    if s < 1:
        text = f"{s * 1000:.0f} ms"
    elif s < 60:
        text = f"{s:.1f} s"
    elif s < 3600:
        text = f"{s / 60:.0f} min"
    elif s < 86400:
        text = f"{s / 3600:.1f} h".replace(".0 h", " h")
    else:
        text = f"{s / 86400:.1f} d".replace(".0 d", " d")
    return sign + text


__all__ = [
    "format_age",
    "format_instant",
    "format_ms",
    "iso",
    "local_clock",
    "relative",
    "to_datetime",
]
