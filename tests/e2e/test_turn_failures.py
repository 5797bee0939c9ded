"""A turn that raises is retried with backoff a bounded number of times, then
the run is suspended with the error recorded.

The turn escapes its own failure handling here two ways: an ``on_signal``
handler that raises while its signal is delivered (no command failed, so
there is no workflow failure to record), and a patched ``Turn.drive`` that
raises (a bug in the engine). Without the bound each maintenance pass would
re-drive the still-running run at once, forever.
"""

from __future__ import annotations

import itertools
import logging

import pytest

from tests.e2e.helpers import latest
from weft_django import activity, client, workflow
from weft_django.engine.turn import Turn
from weft_django.engine.turn import failures as turn_failures


@activity()
def tf_one(n: int) -> int:
    return n


def _refuse(payload):
    raise ValueError(f"handler refuses {payload!r}")


@workflow(name="tf-bad-handler")
def tf_bad_handler(ctx, data):
    ctx.on_signal("boom", _refuse)
    return (yield ctx.wait_for_signal("never"))


@workflow(name="tf-plain")
def tf_plain(ctx, data):
    return (yield ctx.run(tf_one, data))


def _count_turns(monkeypatch, fail_first: int | None = None) -> list[int]:
    """Record the engine-clock time of every turn; the first ``fail_first``
    of them raise (``None``: let the real turn run)."""
    attempts: list[int] = []
    real = Turn.drive

    def drive(self):
        attempts.append(self.host.now_ms())
        if fail_first is not None and len(attempts) <= fail_first:
            raise RuntimeError(f"engine bug #{len(attempts)}")
        return real(self)

    monkeypatch.setattr(Turn, "drive", drive)
    return attempts


def _passes(weft_env, n: int, step_ms: int) -> None:
    for _ in range(n):
        weft_env.engine.run_maintenance()
        weft_env.clock.advance_ms(step_ms)


@pytest.mark.django_db(transaction=True)
def test_a_failing_turn_is_retried_with_backoff_then_suspended(weft_env, monkeypatch, caplog):
    attempts = _count_turns(monkeypatch)
    client.start("tf-bad-handler", None, workflow_id="tf-nested")
    weft_env.run_until_idle()
    assert latest("tf-nested").status == "parked"
    attempts.clear()
    client.signal("tf-nested", "boom", 1)
    start = weft_env.clock()
    with caplog.at_level(logging.WARNING, logger="weft_django.engine"):
        _passes(weft_env, 400, 100)  # 40 s of engine time, a pass every 100 ms
    limit = weft_env.engine.settings.turn_max_failures
    assert limit == 5
    assert len(attempts) == limit, attempts
    gaps = [b - a for a, b in itertools.pairwise(attempts)]
    expected = [turn_failures.retry_delay_ms(n) for n in range(1, limit)]
    assert all(e <= g < e + 200 for g, e in zip(gaps, expected, strict=True)), (gaps, expected)
    assert attempts[0] - start < 200
    run = latest("tf-nested")
    assert run.status == "suspended"
    assert run.error["type"] == "ValueError"
    assert "handler refuses 1" in run.error["message"]
    assert "ValueError" in run.error["traceback"]
    assert run.turn_failures == limit and run.turn_retry_at is None
    assert "ValueError" in run.suspended_reason
    events = [getattr(r, "weft", {}) for r in caplog.records if r.levelno == logging.WARNING]
    retries = [e for e in events if e.get("event") == "turn_failed"]
    assert [e["failures"] for e in retries] == list(range(1, limit))
    [exhausted] = [e for e in events if e.get("event") == "turn_failures_exhausted"]
    assert exhausted == {
        "event": "turn_failures_exhausted",
        "workflow_id": "tf-nested",
        "run_id": str(run.pk),
        "failures": limit,
        "error_type": "ValueError",
    }


@pytest.mark.django_db(transaction=True)
def test_a_transient_failure_that_succeeds_on_retry_completes_and_resets(weft_env, monkeypatch):
    attempts = _count_turns(monkeypatch, fail_first=2)
    client.start("tf-plain", 7, workflow_id="tf-transient")
    _passes(weft_env, 60, 100)
    assert len(attempts) == 3
    run = latest("tf-transient")
    assert (run.status, run.result) == ("completed", 7)
    assert (run.turn_failures, run.turn_retry_at) == (0, None)


@pytest.mark.django_db(transaction=True)
def test_a_run_between_retries_is_not_driven_and_the_engine_is_idle(weft_env, monkeypatch):
    attempts = _count_turns(monkeypatch, fail_first=1)
    client.start("tf-plain", 3, workflow_id="tf-idle")
    assert weft_env.run_until_idle() >= 1  # picked up, the turn raised
    run = latest("tf-idle")
    assert (run.status, run.turn_failures) == ("running", 1)
    assert run.turn_retry_at == weft_env.clock() + turn_failures.retry_delay_ms(1)
    assert weft_env.run_until_idle() == 0  # backing off: nothing to do, no hot loop
    assert len(attempts) == 1
    weft_env.clock.advance_ms(turn_failures.retry_delay_ms(1))
    weft_env.run_until_idle()
    assert latest("tf-idle").status == "completed"
    assert len(attempts) == 2


@pytest.mark.django_db(transaction=True)
def test_resume_of_a_run_suspended_by_failing_turns_works_and_resets(weft_env, monkeypatch):
    limit = 2
    attempts = _count_turns(monkeypatch, fail_first=limit)
    weft_env.engine.settings = weft_env.engine.settings.with_overrides(turn_max_failures=limit)
    client.start("tf-plain", 5, workflow_id="tf-resume")
    _passes(weft_env, 50, 100)
    run = latest("tf-resume")
    assert (run.status, run.turn_failures) == ("suspended", limit)
    assert run.error["message"] == "engine bug #2"
    client.resume("tf-resume")
    run = latest("tf-resume")
    assert (run.status, run.turn_failures, run.turn_retry_at, run.error) == (
        "pending",
        0,
        None,
        None,
    )
    weft_env.run_until_idle()
    run = latest("tf-resume")
    assert (run.status, run.result) == ("completed", 5)
    assert len(attempts) == limit + 1


@workflow(name="tf-waiter")
def tf_waiter(ctx, data):
    got = yield ctx.wait_for_signal("go")
    return (yield ctx.run(tf_one, got))


@pytest.mark.django_db(transaction=True)
def test_a_woken_parked_run_whose_turn_raises_backs_off_too(weft_env, monkeypatch):
    client.start("tf-waiter", None, workflow_id="tf-waiter")
    weft_env.run_until_idle()
    assert latest("tf-waiter").status == "parked"
    attempts = _count_turns(monkeypatch, fail_first=1)
    client.signal("tf-waiter", "go", 9)
    weft_env.run_until_idle()
    run = latest("tf-waiter")
    assert (run.status, run.turn_failures, len(attempts)) == ("parked", 1, 1)
    assert weft_env.run_until_idle() == 0  # the wake waits out the backoff
    weft_env.clock.advance_ms(turn_failures.retry_delay_ms(1))
    weft_env.run_until_idle()
    run = latest("tf-waiter")
    assert (run.status, run.result, run.turn_failures, len(attempts)) == ("completed", 9, 0, 2)


@pytest.mark.django_db(transaction=True)
def test_an_engine_without_the_claim_records_nothing(weft_env, monkeypatch):
    from weft_django.engine import Engine

    _count_turns(monkeypatch, fail_first=1)
    client.start("tf-plain", 1, workflow_id="tf-fenced")
    weft_env.run_until_idle()
    before = latest("tf-fenced")
    other = Engine(clock=weft_env.clock, background_tasks="manual")
    try:
        outcome = turn_failures.record_turn_failure(other, before.pk, RuntimeError("x"))
    finally:
        other.dispose(grace=0)
    after = latest("tf-fenced")
    assert outcome.outcome == "lost"
    assert (after.version, after.turn_failures, after.turn_retry_at) == (
        before.version,
        before.turn_failures,
        before.turn_retry_at,
    )


def test_the_backoff_doubles_up_to_its_cap_and_refuses_a_bad_count():
    delays = [turn_failures.retry_delay_ms(n) for n in range(1, 9)]
    assert delays == [1_000, 2_000, 4_000, 8_000, 16_000, 32_000, 60_000, 60_000]
    assert turn_failures.retry_delay_ms(10_000) == turn_failures.MAX_RETRY_DELAY_MS
    for bad in (0, -1, True, 1.5):
        with pytest.raises(ValueError, match=repr(bad)):
            turn_failures.retry_delay_ms(bad)


@pytest.mark.django_db(transaction=True)
def test_when_suspending_fails_too_the_run_still_backs_off(weft_env, monkeypatch):
    """The bug may be in the suspending path: no hot loop either way."""
    _count_turns(monkeypatch, fail_first=100)
    weft_env.engine.settings = weft_env.engine.settings.with_overrides(turn_max_failures=1)

    def broken_suspend(*args, **kwargs):
        raise RuntimeError("suspend is broken too")

    monkeypatch.setattr(turn_failures, "_suspend", broken_suspend)
    client.start("tf-plain", 1, workflow_id="tf-broken-suspend")
    weft_env.run_until_idle()
    run = latest("tf-broken-suspend")
    assert (run.status, run.turn_failures) == ("running", 1)
    assert run.turn_retry_at == weft_env.clock() + turn_failures.retry_delay_ms(1)
    assert weft_env.run_until_idle() == 0


@pytest.mark.django_db(transaction=True)
def test_a_database_outage_backs_off_but_never_suspends(weft_env, monkeypatch):
    """Turns that fail because the database refused the connection ("too many
    clients") are retried with the same backoff, past the bound, and the run
    completes once the database serves again."""
    from django.db import OperationalError

    outage = {"left": 8}
    real = Turn.drive

    def drive(self):
        if outage["left"] > 0:
            outage["left"] -= 1
            try:
                raise RuntimeError("connect")
            except RuntimeError as cause:
                raise OperationalError("FATAL: sorry, too many clients already") from cause
        return real(self)

    monkeypatch.setattr(Turn, "drive", drive)
    client.start("tf-plain", 3, workflow_id="tf-outage")
    for _ in range(1200):  # up to 600 s of engine time: backoffs 1, 2, 4 ... 60 s
        if latest("tf-outage").status not in ("pending", "running"):
            break
        _passes(weft_env, 1, 500)
    limit = weft_env.engine.settings.turn_max_failures
    assert outage["left"] == 0 and limit < 8
    run = latest("tf-outage")
    assert run.status == "completed", (run.status, run.error)
    assert run.turn_failures == 0


def test_only_database_errors_count_as_an_outage():
    from django.db import DataError, IntegrityError, InterfaceError, OperationalError

    assert turn_failures.is_database_outage(OperationalError("too many clients"))
    assert turn_failures.is_database_outage(InterfaceError("connection already closed"))
    try:
        try:
            raise InterfaceError("dropped")
        except InterfaceError as inner:
            raise RuntimeError("while driving") from inner
    except RuntimeError as wrapped:
        assert turn_failures.is_database_outage(wrapped)
    assert not turn_failures.is_database_outage(IntegrityError("duplicate key"))
    assert not turn_failures.is_database_outage(DataError("value too long"))
    assert not turn_failures.is_database_outage(ValueError("handler refuses"))
