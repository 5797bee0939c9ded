"""The soak's capability audits catch what they are for (``check_capabilities``).

The soak asserts each figure is 0; these show a figure is not 0 by
construction: a tick fired twice, a gap in the ticks, a tail that never
fired, and 'deadlock detected' lines (one per traceback) are each found from
records shaped like the real ones. No database.
"""

from __future__ import annotations

from pathlib import Path

from devtools.chaos import check_capabilities as capabilities
from devtools.chaos.check import Audit, ScheduleWindow
from weft_django.models import WorkflowRun


def _tick(ms: int, n: int = 0) -> WorkflowRun:
    return WorkflowRun(
        workflow_id=f"chaos-tick@{ms}{'-again' * n}",
        name="chaos-ticked",
        idempotency_key=f"weft.schedule:chaos-tick:{ms}",
    )


def test_ticks_once_each_and_contiguous_pass() -> None:
    audit = Audit()
    window = ScheduleWindow("chaos-tick", 1000, since_ms=10_500, deleted_ms=14_200)
    capabilities.check_schedule(audit, window, [_tick(ms) for ms in (11_000, 12_000, 13_000)])
    assert audit.schedule_ticks == 3
    assert audit.schedule_ticks_twice == [] and audit.schedule_ticks_missed == []


def test_a_tick_twice_a_gap_and_a_late_first_tick_are_found() -> None:
    audit = Audit()
    window = ScheduleWindow("chaos-tick", 1000, since_ms=9_000, deleted_ms=15_000)
    runs = [_tick(11_000), _tick(11_000, 1), _tick(12_000), _tick(14_000)]
    capabilities.check_schedule(audit, window, runs)
    assert audit.schedule_ticks_twice == ["tick 11000: 2 runs"]
    assert audit.schedule_ticks_missed == [
        "first tick 11000 more than 1000 ms after creation 9000",
        "1 ticks missing after 12000",
    ]


def test_a_tail_that_never_fired_is_missed() -> None:
    audit = Audit()
    end = 12_000 + capabilities.SCHEDULE_TAIL_SLACK_MS + 1
    window = ScheduleWindow("chaos-tick", 1000, since_ms=10_500, deleted_ms=end)
    capabilities.check_schedule(audit, window, [_tick(11_000), _tick(12_000)])
    assert len(audit.schedule_ticks_missed) == 1
    assert "the tail never fired" in audit.schedule_ticks_missed[0]


def test_a_tail_cut_short_by_a_database_outage_is_not_missed() -> None:
    """Ticks due while PostgreSQL was down fire once it is back (catch-up);
    a deletion right after the outage leaves them unfired, by design."""
    from devtools.chaos.injector import FaultRecord

    end = 12_000 + capabilities.SCHEDULE_TAIL_SLACK_MS + 3_000
    window = ScheduleWindow("chaos-tick", 1000, since_ms=10_500, deleted_ms=end)
    outage = FaultRecord("pg_restart", "*", "*", start_ms=end - 6_000, end_ms=end - 500)
    audit = Audit()
    capabilities.check_schedule(audit, window, [_tick(11_000), _tick(12_000)], [outage])
    assert audit.schedule_ticks_missed == []
    short = FaultRecord("pg_restart", "*", "*", start_ms=end - 2_000, end_ms=end - 500)
    audit = Audit()
    capabilities.check_schedule(audit, window, [_tick(11_000), _tick(12_000)], [short])
    assert "the tail never fired" in audit.schedule_ticks_missed[0]


def test_a_tail_cut_short_by_the_drivers_holder_dying_is_not_missed() -> None:
    """Engines that held the driver's claim died one after another (a poison
    run): each costs a takeover and a retried step; a death of an engine that
    did not hold the driver costs nothing."""
    from devtools.chaos.injector import FaultRecord

    end = 12_000 + capabilities.SCHEDULE_TAIL_SLACK_MS + 20_000
    window = ScheduleWindow("chaos-tick", 1000, since_ms=10_500, deleted_ms=end)
    runs = [_tick(11_000), _tick(12_000)]

    def crash(at: int, held: dict[str, int]) -> FaultRecord:
        return FaultRecord("crash", "chaos-e1", "chaos-e1.4", at, at + 500, held=held)

    driver = {"weft.schedule:chaos-tick": 3, "chaos-0001": 2}
    audit = Audit()
    capabilities.check_schedule(audit, window, runs, [crash(13_000, driver), crash(20_000, driver)])
    assert audit.schedule_ticks_missed == []
    audit = Audit()
    others = {"chaos-0001": 2}
    capabilities.check_schedule(audit, window, runs, [crash(13_000, others), crash(20_000, others)])
    assert "the tail never fired" in audit.schedule_ticks_missed[0]
    audit = Audit()  # one disruption: 15 s more, not enough for a 30 s silent tail
    capabilities.check_schedule(audit, window, runs, [crash(13_000, driver)])
    assert "the tail never fired" in audit.schedule_ticks_missed[0]


def test_deadlocks_are_counted_once_per_traceback(tmp_path: Path) -> None:
    (tmp_path / "chaos-e1.1.log").write_text(
        "Traceback (most recent call last):\n"
        "psycopg.errors.DeadlockDetected: deadlock detected\n"
        "DETAIL:  Process 1 waits for ShareLock on transaction 2\n"
        "The above exception was the direct cause of the following exception:\n"
        "django.db.utils.OperationalError: deadlock detected\n"
        "INFO all good\n"
    )
    (tmp_path / "chaos-e2.1.log").write_text("INFO nothing here\n")
    audit = Audit()
    capabilities.count_deadlocks(audit, tmp_path)
    assert audit.deadlocks == 1
    assert audit.deadlock_lines[0].startswith("chaos-e1.1.log:2: ")
