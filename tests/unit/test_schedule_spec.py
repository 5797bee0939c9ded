"""Schedule specs and ticks (weft_django.kernel.schedule_spec): pure, no database.

Protects: a tick depends only on the spec (the same on every engine), DST
behaves as cron users expect, and every bad value is refused with a message
naming it (the client, the settings check and the API share this parser).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from weft_django.conf import build_settings
from weft_django.kernel.schedule_spec import (
    build_spec,
    count_ticks,
    jitter_offset_ms,
    next_ticks,
    parse_declared,
    tick_key,
    tick_workflow_id,
    ticks_after,
)

PARIS = ZoneInfo("Europe/Paris")


def ms(dt: datetime) -> int:
    return int(dt.timestamp() * 1000)


def test_every_ticks_are_aligned_and_strictly_after():
    spec = build_spec("s", {"workflow": "w", "every": 1})
    assert next_ticks(spec, 1_000, 3) == [2_000, 3_000, 4_000]
    assert next_ticks(spec, 1_500, 2) == [2_000, 3_000]
    anchored = build_spec(
        "s",
        {
            "workflow": "w",
            "every": timedelta(hours=1),
            "start_at": datetime(2026, 1, 1, 0, 30, tzinfo=UTC),
        },
    )
    first = next_ticks(anchored, 0, 1)[0]
    assert first == ms(datetime(2026, 1, 1, 0, 30, tzinfo=UTC))  # start_at itself ticks


def test_end_at_ends_the_ticks():
    spec = build_spec(
        "s",
        {
            "workflow": "w",
            "every": 1,
            "start_at": datetime.fromtimestamp(10, UTC),
            "end_at": datetime.fromtimestamp(12, UTC),
        },
    )
    assert list(ticks_after(spec, 0)) == [10_000, 11_000, 12_000]


def test_cron_in_a_timezone():
    spec = build_spec("s", {"workflow": "w", "cron": "0 3 * * *", "timezone": "Europe/Paris"})
    start = ms(datetime(2026, 6, 1, 12, tzinfo=UTC))
    assert next_ticks(spec, start, 1) == [ms(datetime(2026, 6, 2, 3, tzinfo=PARIS))]


def test_dst_missing_hour_fires_once():
    # 2026-03-29 02:00 -> 03:00 in Paris: 02:30 does not exist that day.
    spec = build_spec("s", {"workflow": "w", "cron": "30 2 * * *", "timezone": "Europe/Paris"})
    ticks = next_ticks(spec, ms(datetime(2026, 3, 28, 12, tzinfo=PARIS)), 3)
    assert ticks[0] == ms(datetime(2026, 3, 29, 3, 0, tzinfo=PARIS))  # once, at the gap's end
    assert ticks[1] == ms(datetime(2026, 3, 30, 2, 30, tzinfo=PARIS))
    assert len(set(ticks)) == 3


def test_dst_repeated_hour_fires_once():
    # 2026-10-25 03:00 -> 02:00 in Paris: 02:30 happens twice; the job fires once.
    spec = build_spec("s", {"workflow": "w", "cron": "30 2 * * *", "timezone": "Europe/Paris"})
    ticks = next_ticks(spec, ms(datetime(2026, 10, 24, 12, tzinfo=PARIS)), 2)
    assert ticks[0] == ms(datetime(2026, 10, 25, 2, 30, tzinfo=PARIS))
    assert ticks[1] == ms(datetime(2026, 10, 26, 2, 30, tzinfo=PARIS))
    in_that_day = [t for t in ticks if t < ms(datetime(2026, 10, 26, tzinfo=PARIS))]
    assert len(in_that_day) == 1


def test_count_ticks():
    every = build_spec("s", {"workflow": "w", "every": 1})
    assert count_ticks(every, 0, 10_000) == 10
    assert count_ticks(every, 500, 999) == 0
    cron = build_spec("s", {"workflow": "w", "cron": "* * * * *"})
    assert count_ticks(cron, 0, 600_000) == 10


def test_derived_ids_are_stable_and_valid():
    assert tick_key("nightly", 1_000) == "weft.schedule:nightly:1000"
    assert tick_workflow_id("nightly", 1_700_000_000_123) == "nightly@2023-11-14T22:13:20.123Z"
    spec = build_spec("s", {"workflow": "w", "every": 60, "jitter": 10})
    offsets = {jitter_offset_ms(spec, t) for t in range(0, 600_000, 60_000)}
    assert all(0 <= o < 10_000 for o in offsets) and len(offsets) > 1
    assert jitter_offset_ms(spec, 60_000) == jitter_offset_ms(spec, 60_000)


@pytest.mark.parametrize(
    ("sid", "fields", "fragment"),
    [
        ("s", {"workflow": "w", "cron": "61 * * * *"}, "'61 * * * *'"),
        ("s", {"workflow": "w", "cron": "* * *"}, "5-field"),
        ("s", {"workflow": "w", "every": 1, "timezone": "Mars/Olympus"}, "'Mars/Olympus'"),
        ("s", {"workflow": "w"}, "exactly one of cron or every"),
        ("s", {"workflow": "w", "cron": "* * * * *", "every": 5}, "exactly one of cron or every"),
        ("bad id!", {"workflow": "w", "every": 1}, "'bad id!'"),
        ("x" * 161, {"workflow": "w", "every": 1}, "at most 160"),
        ("s", {"workflow": "w", "every": 0}, "every"),
        ("s", {"workflow": "w", "every": 1, "overlap": "sometimes"}, "'sometimes'"),
        ("s", {"workflow": "w", "every": 1, "colour": "red"}, "'colour'"),
        ("s", {"workflow": "w", "every": 1, "start_at": datetime(2026, 1, 1)}, "aware"),
    ],
)
def test_bad_values_are_named(sid, fields, fragment):
    with pytest.raises(ValueError) as info:
        build_spec(sid, fields)
    assert fragment in str(info.value)


def test_settings_validate_schedules_with_check_ids():
    _settings, problems = build_settings(
        {
            "SCHEDULES": {
                "ok": {"workflow": "w", "cron": "0 3 * * *"},
                "bad": {"workflow": "w", "cron": "nope"},
                "bad id": {"workflow": "w", "every": 1},
                "notadict": 3,
            }
        }
    )
    by_id = {(p.id, p.message.split(":")[0]) for p in problems}
    assert ("weft.E028", "WEFT['SCHEDULES']['bad']") in by_id
    assert any(p.id == "weft.E027" and "'bad id'" in p.message for p in problems)
    assert any(p.id == "weft.E027" and "'notadict'" in p.message for p in problems)
    assert [s.schedule_id for s in _settings.schedules] == ["ok"]
    _s, problems = build_settings({"SCHEDULES": ["x"]})
    assert [p.id for p in problems] == ["weft.E027"]


def test_parse_declared_accepts_the_issue_example():
    specs, problems = parse_declared(
        {
            "nightly-report": {
                "workflow": "reports.nightly",
                "cron": "0 3 * * *",
                "timezone": "Europe/Paris",
            }
        }
    )
    assert problems == [] and specs[0].timezone == "Europe/Paris"
