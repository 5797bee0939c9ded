"""The poll cadence: an idle, LISTENing engine's full pass backs off, and a
wake, a turn that left work or known due work bring it back (``engine.poll_cadence``).

The loop tests run ``SideTasks`` on real threads with counting passes and a
cap far longer than the test: a pass that came only because the gap ran
out would time the ``wait_for`` out, so each one shows a pass came *because
of* the request.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from tests.support import wait_for
from weft_django.engine.scheduling.cadence import IDLE_POLL_CAP_MS, PollCadence, idle_cap_ms
from weft_django.engine.scheduling.loops import SideTasks

HOUR_MS = 3_600_000


def test_an_idle_pass_doubles_the_gap_up_to_the_cap() -> None:
    cadence = PollCadence(200, 1000)
    gaps = [cadence.after_pass(found_work=False, allowed=True, due_in_ms=None) for _ in range(5)]
    assert gaps == [400, 800, 1000, 1000, 1000]
    assert cadence.backed_off


def test_work_found_or_no_listen_keeps_the_poll_interval() -> None:
    cadence = PollCadence(200, 1000)
    cadence.after_pass(found_work=False, allowed=True, due_in_ms=None)
    assert cadence.after_pass(found_work=True, allowed=True, due_in_ms=None) == 200
    cadence.after_pass(found_work=False, allowed=True, due_in_ms=None)
    assert cadence.after_pass(found_work=False, allowed=False, due_in_ms=None) == 200
    assert not cadence.backed_off


def test_known_due_work_bounds_the_gap_but_never_below_the_interval() -> None:
    cadence = PollCadence(200, HOUR_MS)
    for _ in range(20):
        cadence.after_pass(found_work=False, allowed=True, due_in_ms=None)
    assert cadence.after_pass(found_work=False, allowed=True, due_in_ms=700) == 700
    assert cadence.after_pass(found_work=False, allowed=True, due_in_ms=0) == 200
    # The bound is for this gap only: the backed-off gap is kept.
    assert cadence.gap_ms == HOUR_MS


def test_reset_says_whether_it_was_backing_off() -> None:
    cadence = PollCadence(200, 1000)
    assert cadence.reset() is False
    cadence.after_pass(found_work=False, allowed=True, due_in_ms=None)
    assert cadence.reset() is True
    assert cadence.gap_ms == 200


def test_the_cap_lies_between_the_poll_and_the_renew_interval() -> None:
    assert idle_cap_ms(200, 5000) == IDLE_POLL_CAP_MS
    assert idle_cap_ms(200, 1000) == 1000
    assert idle_cap_ms(3000, 5000) == 3000


class Loop:
    """A ``SideTasks`` whose passes count themselves; LISTEN "up", nothing found."""

    def __init__(self, cadence: PollCadence | None) -> None:
        self.full = 0
        self.pickups = 0
        self._lock = threading.Lock()
        self.tasks = SideTasks(
            renew=lambda: None,
            poll=self._full,
            pickup=self._pickup,
            renew_interval_ms=HOUR_MS,
            poll_interval_ms=50,
            claim_ttl_ms=3 * HOUR_MS,
            database="default",
            cadence=cadence,
            next_gap_ms=lambda c: c.after_pass(found_work=False, allowed=True, due_in_ms=None),
        )

    def _full(self) -> None:
        with self._lock:
            self.full += 1

    def _pickup(self) -> None:
        with self._lock:
            self.pickups += 1


@pytest.fixture
def backed_off() -> Iterator[Loop]:
    cadence = PollCadence(50, HOUR_MS)
    for _ in range(40):  # already at the cap: no pass comes by itself
        cadence.after_pass(found_work=False, allowed=True, due_in_ms=None)
    loop = Loop(cadence)
    loop.tasks.start()
    try:
        wait_for("the first full pass", lambda: loop.full == 1)
        yield loop
    finally:
        loop.tasks.stopping.set()
        loop.tasks.renew_stop.set()
        loop.tasks.wake.set()
        loop.tasks.join(timeout=5)


def test_a_full_wake_runs_the_pass_at_once_and_resets_the_gap(backed_off: Loop) -> None:
    backed_off.tasks.request(full=True)
    wait_for("the woken full pass", lambda: backed_off.full == 2)
    assert backed_off.pickups == 0


def test_a_pickup_wake_runs_only_the_pickup(backed_off: Loop) -> None:
    backed_off.tasks.request(full=False)
    wait_for("the pickup pass", lambda: backed_off.pickups == 1)
    assert backed_off.full == 1


def test_soon_brings_the_next_full_pass_within_the_interval(backed_off: Loop) -> None:
    backed_off.tasks.soon()
    wait_for("the full pass soon() asked for", lambda: backed_off.full == 2)
    assert backed_off.pickups == 0


def test_without_a_cadence_the_loop_polls_every_interval() -> None:
    loop = Loop(None)
    loop.tasks.start()
    try:
        wait_for("passes every poll interval", lambda: loop.full >= 3)
    finally:
        loop.tasks.stopping.set()
        loop.tasks.renew_stop.set()
        loop.tasks.wake.set()
        loop.tasks.join(timeout=5)
