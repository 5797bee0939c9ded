"""A Celery node's polling re-drives are spaced out (``transports.celery.redrive``).

Invariant protected: a run that stays undriven is re-sent -- a lost message
costs a bounded delay -- but never once per pass while its messages wait in
a backlog (the congestion collapse the chaos soak showed: wakes a minute
late, most of the node's queue duplicates). Gaps: one interval, then
doubling up to the cap; a new claim generation, or a key not asked for over
two gaps, starts afresh.
"""

from __future__ import annotations

import itertools

from weft_django.transports.celery.redrive import CAP_INTERVALS, RedriveBackoff

INTERVAL = 1_000


def _sends(backoff: RedriveBackoff, key: tuple[str, int, str], until_ms: int) -> list[int]:
    """Ask every 100 ms from 0 to ``until_ms``; the instants admitted."""
    return [t for t in range(0, until_ms + 1, 100) if backoff.admit(key, t)]


def test_gaps_double_up_to_the_cap() -> None:
    backoff = RedriveBackoff(INTERVAL)
    sent = _sends(backoff, ("run", 1, "drive"), 80_000)
    gaps = [b - a for a, b in itertools.pairwise(sent)]
    assert gaps[:5] == [1_000, 2_000, 4_000, 8_000, 16_000]
    assert max(gaps) == CAP_INTERVALS * INTERVAL
    assert all(g == CAP_INTERVALS * INTERVAL for g in gaps[4:])


def test_a_new_generation_or_wake_kind_is_sent_at_once() -> None:
    backoff = RedriveBackoff(INTERVAL)
    assert backoff.admit(("run", 1, "drive"), 0)
    assert not backoff.admit(("run", 1, "drive"), 500)
    assert backoff.admit(("run", 2, "drive"), 500)  # taken over, or picked up again
    assert backoff.admit(("run", 1, "signal"), 500)
    assert backoff.admit(("other", 1, "drive"), 500)


def test_a_key_not_asked_for_a_while_starts_afresh() -> None:
    backoff = RedriveBackoff(INTERVAL)
    key = ("run", 1, "drive")
    for t in (0, 1_000, 3_000, 7_000):  # gaps 1 s, 2 s, 4 s; the next one 8 s
        assert backoff.admit(key, t)
    assert not backoff.admit(key, 7_000 + 7_999)
    # Not asked for three gaps (3 x 8 s): the run was driven meanwhile, this is new.
    assert backoff.admit(key, 7_000 + 24_000)
    assert not backoff.admit(key, 7_000 + 24_000 + 999)
    assert backoff.admit(key, 7_000 + 24_000 + 1_000)


def test_keys_are_bounded() -> None:
    from weft_django.transports.celery import redrive

    backoff = RedriveBackoff(INTERVAL)
    for i in range(redrive.MAX_KEYS + 10):
        backoff.admit((f"r{i}", 1, "drive"), 0)
    assert len(backoff) == redrive.MAX_KEYS
