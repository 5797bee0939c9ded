"""Takeover cooldown (SPEC §4.4, weft's ``WorkflowClaimTakeoverCooldown``).

Invariant protected: after being deposed from a workflow, an engine leaves it
alone for exactly one fixed window -- active while ``now < until``, inactive
at ``now == until`` -- a second deposition restarts (never extends) the
window from its own ``now``, and ``clear`` ends it at once. Ids are
independent of one another.
"""

from __future__ import annotations

import pytest

from weft_django.ownership.registry import TakeoverCooldown

WINDOW = 5_000


def test_nothing_recorded_is_not_active() -> None:
    cooldown = TakeoverCooldown(WINDOW)
    assert not cooldown.is_active("wf", 0)
    assert cooldown.active_ids(0) == []


def test_window_is_active_strictly_before_its_end() -> None:
    cooldown = TakeoverCooldown(WINDOW)
    cooldown.record_deposition("wf", 1_000)
    assert cooldown.is_active("wf", 1_000)
    assert cooldown.is_active("wf", 1_000 + WINDOW - 1)
    assert not cooldown.is_active("wf", 1_000 + WINDOW)


def test_boundary_is_not_active_even_when_asked_first_at_the_boundary() -> None:
    cooldown = TakeoverCooldown(WINDOW)
    cooldown.record_deposition("wf", 1_000)
    assert not cooldown.is_active("wf", 1_000 + WINDOW)
    assert cooldown.active_ids(1_000 + WINDOW) == []


def test_second_deposition_restarts_the_window_from_its_own_now() -> None:
    cooldown = TakeoverCooldown(WINDOW)
    cooldown.record_deposition("wf", 1_000)
    cooldown.record_deposition("wf", 4_000)
    # The first window would have ended at 6_000; the restart moves it to 9_000.
    assert cooldown.is_active("wf", 6_000)
    assert cooldown.is_active("wf", 8_999)
    assert not cooldown.is_active("wf", 9_000)


def test_restart_does_not_extend_beyond_one_window() -> None:
    cooldown = TakeoverCooldown(WINDOW)
    cooldown.record_deposition("wf", 1_000)
    cooldown.record_deposition("wf", 1_000)
    assert not cooldown.is_active("wf", 1_000 + WINDOW)


def test_a_deposition_recorded_earlier_than_the_last_shortens_nothing_it_replaces() -> None:
    # "Restart" means the window is exactly one window from the latest call.
    cooldown = TakeoverCooldown(WINDOW)
    cooldown.record_deposition("wf", 10_000)
    cooldown.record_deposition("wf", 2_000)
    assert not cooldown.is_active("wf", 7_000)


def test_clear_ends_the_window() -> None:
    cooldown = TakeoverCooldown(WINDOW)
    cooldown.record_deposition("wf", 1_000)
    cooldown.clear("wf")
    assert not cooldown.is_active("wf", 1_001)
    cooldown.clear("never-recorded")  # harmless


def test_ids_are_independent() -> None:
    cooldown = TakeoverCooldown(WINDOW)
    cooldown.record_deposition("a", 1_000)
    cooldown.record_deposition("b", 3_000)
    assert cooldown.active_ids(5_000) == ["a", "b"]
    assert cooldown.active_ids(6_000) == ["b"]
    cooldown.clear("b")
    assert not cooldown.is_active("b", 6_000)
    assert not cooldown.is_active("a", 6_000)


def test_zero_window_is_never_active() -> None:
    cooldown = TakeoverCooldown(0)
    cooldown.record_deposition("wf", 1_000)
    assert not cooldown.is_active("wf", 1_000)


@pytest.mark.parametrize("window", [-1, 1.5, True, "5000", None])
def test_window_must_be_a_non_negative_int(window) -> None:
    with pytest.raises(ValueError, match="cooldown window"):
        TakeoverCooldown(window)
