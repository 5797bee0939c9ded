"""Queues with fenced flow control (issue #16 part 2), end to end on one database."""

from __future__ import annotations

from itertools import pairwise

import pytest
from django.core.checks import run_checks
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings

from tests.e2e.helpers import latest, row_counts
from weft_django import activity, client, workflow
from weft_django.conf import build_settings
from weft_django.engine import Engine
from weft_django.engine.operations.start import UnknownQueueError
from weft_django.engine.queues.flow import waiting_reason
from weft_django.engine.workflow.definitions import registry
from weft_django.kernel.queue_spec import parse_rate
from weft_django.models import QueueSlot, WorkflowRun
from weft_django.ownership.slots import live_slots

QUEUES = {
    "q2": {"concurrency": 2},
    "q1": {"concurrency": 1},
    "keyed": {"concurrency": 10, "per_key_concurrency": 1},
    "rated": {"rate": "3/m"},
    "free": {"parked_holds_slot": False},
}

ORDER: list[str] = []


@activity()
def note(tag):
    ORDER.append(tag)
    return tag


@workflow(name="q-wait")
def q_wait(ctx, data):
    yield ctx.run(note, data)
    got = yield ctx.wait_for_signal("go")
    return got


@workflow(name="q-quick")
def q_quick(ctx, data):
    return (yield ctx.run(note, data))


@workflow(name="q-declared", queue="q1")
def q_declared(ctx, data):
    got = yield ctx.wait_for_signal("go")
    return got


pytestmark = [pytest.mark.django_db(transaction=True)]


@pytest.fixture(autouse=True)
def _queues():
    ORDER.clear()
    with override_settings(WEFT={"QUEUES": QUEUES}):
        yield


def _engine(clock, **kw):
    return Engine(clock=clock, background_tasks="manual", **kw).boot()


def _statuses(prefix):
    return sorted(
        WorkflowRun.objects.filter(workflow_id__startswith=prefix).values_list("status", flat=True)
    )


def _live(name):
    return live_slots(build_settings({"QUEUES": QUEUES})[0].queues[name], "default").count()


def test_concurrency_two_holds_and_frees(clock):
    engine = _engine(clock)
    try:
        for i in range(5):
            client.start("q-wait", f"w{i}", workflow_id=f"c-{i}", queue="q2")
        engine.run_until_idle()
        assert _statuses("c-") == ["parked", "parked", "pending", "pending", "pending"]
        assert _live("q2") == 2
        waiting = [r for r in WorkflowRun.objects.filter(status="pending")]
        assert all(
            waiting_reason(r) == "waiting for a slot of queue 'q2' (2/2 in use)" for r in waiting
        )
        parked = WorkflowRun.objects.filter(status="parked").order_by("created_at")
        for run in parked:
            client.signal(run.workflow_id, "go", 1)
        engine.run_until_idle()
        assert _statuses("c-").count("completed") == 2
        assert _statuses("c-").count("parked") == 2
        for run in WorkflowRun.objects.filter(status="parked"):
            client.signal(run.workflow_id, "go", 1)
        engine.run_until_idle()
        for run in WorkflowRun.objects.filter(status="parked"):
            client.signal(run.workflow_id, "go", 1)
        engine.run_until_idle()
        assert _statuses("c-") == ["completed"] * 5
        assert _live("q2") == 0
        # FIFO within one priority
        assert [f"w{i}" for i in range(5)] == ORDER
    finally:
        engine.dispose(grace=0)


def test_priority_higher_first_then_fifo(clock):
    engine = _engine(clock)
    try:
        client.start("q-wait", "first", workflow_id="p-0", queue="q1")
        engine.run_until_idle()  # p-0 holds the one slot
        for i, prio in enumerate([0, 5, 0, 5, 9]):
            client.start(
                "q-quick", f"p{i + 1}:{prio}", workflow_id=f"p-{i + 1}", queue="q1", priority=prio
            )
        engine.run_until_idle()
        assert ORDER == ["first"]
        client.signal("p-0", "go", 1)
        engine.run_until_idle()
        assert ORDER == ["first", "p5:9", "p2:5", "p4:5", "p1:0", "p3:0"]
    finally:
        engine.dispose(grace=0)


def test_per_key_concurrency(clock):
    engine = _engine(clock)
    try:
        for i, key in enumerate(["a", "a", "b", "a", "b", "c"]):
            client.start(
                "q-wait", f"k{i}", workflow_id=f"k-{i}", queue="keyed", concurrency_key=key
            )
        engine.run_until_idle()
        parked = dict(
            WorkflowRun.objects.filter(status="parked").values_list(
                "workflow_id", "concurrency_key"
            )
        )
        assert sorted(parked.values()) == ["a", "b", "c"]
        reason = waiting_reason(latest("k-1"))
        assert reason is not None and "concurrency key 'a'" in reason and "(1/1 in use)" in reason
    finally:
        engine.dispose(grace=0)


def test_rate_limit_on_the_engine_clock(clock):
    engine = _engine(clock)
    try:
        for i in range(10):
            client.start("q-quick", f"r{i}", workflow_id=f"r-{i}", queue="rated")
        engine.run_until_idle()
        assert _statuses("r-").count("completed") == 3
        assert "rate limit" in (waiting_reason(latest("r-5")) or "")
        clock.advance(30_000)
        engine.run_until_idle()
        assert _statuses("r-").count("completed") == 3
        clock.advance(30_001)
        engine.run_until_idle()
        assert _statuses("r-").count("completed") == 6
    finally:
        engine.dispose(grace=0)


def test_declared_queue_and_cancel_frees_the_slot(clock):
    engine = _engine(clock)
    try:
        client.start("q-declared", None, workflow_id="d-0")
        client.start("q-declared", None, workflow_id="d-1")
        engine.run_until_idle()
        assert latest("d-0").queue == "q1"
        assert _statuses("d-") == ["parked", "pending"]
        first = WorkflowRun.objects.get(status="parked")
        client.cancel(first.workflow_id)  # the rotation ends the generation: the slot frees with it
        assert _live("q1") == 0
        engine.run_until_idle()
        assert _statuses("d-") == ["cancelled", "parked"]
    finally:
        engine.dispose(grace=0)


def test_takeover_readmits_under_the_new_generation(clock):
    first = _engine(clock, engine_id="qa")
    second = _engine(clock, engine_id="qb")
    try:
        client.start("q-declared", None, workflow_id="t-0")
        first.run_until_idle()
        assert _live("q1") == 1
        client.start("q-declared", None, workflow_id="t-1")
        # qa stops renewing (a crash): past the TTL qb takes t-0 over
        clock.advance(120_000)
        second.run_until_idle()
        slots = list(QueueSlot.objects.filter(workflow_id="t-0").values_list("epoch", flat=True))
        assert sorted(slots) == [1, 2]
        assert _live("q1") == 1
        assert latest("t-1").status == "pending"
        client.signal("t-0", "go", 1)
        second.run_until_idle()
        assert latest("t-0").status == "completed"
        assert latest("t-1").status == "parked"
    finally:
        first.dispose(grace=0)
        second.dispose(grace=0)


def test_unqueued_runs_unchanged(clock):
    engine = _engine(clock)
    try:
        client.start("q-quick", "plain", workflow_id="u-0")
        engine.run_until_idle()
        assert latest("u-0").status == "completed"
        assert latest("u-0").queue is None
        assert QueueSlot.objects.count() == 0
    finally:
        engine.dispose(grace=0)


def test_bad_input_writes_nothing():
    before = row_counts()
    with pytest.raises(UnknownQueueError, match="'nope'"):
        client.start("q-quick", 1, queue="nope")
    with pytest.raises(ValueError, match="priority"):
        client.start("q-quick", 1, queue="q1", priority="high")
    with pytest.raises(ValueError, match="needs a queue"):
        client.start("q-quick", 1, concurrency_key="t")
    assert row_counts() == before


@pytest.mark.parametrize(
    ("queues", "needle"),
    [
        ({"x": {"rate": "100/x"}}, "'100/x'"),
        ({"x": {"concurrency": 0}}, "got 0"),
        ({"x": {"per_key_concurrency": -1}}, "got -1"),
        ({"x": {"concurency": 2}}, "concurency"),
        ({"x": 3}, "got 3"),
    ],
)
def test_bad_queue_settings(queues, needle):
    _, problems = build_settings({"QUEUES": queues})
    assert [p.id for p in problems] == ["weft.E030"]
    assert needle in problems[0].message
    with (
        override_settings(WEFT={"QUEUES": queues}),
        pytest.raises(ImproperlyConfigured, match="QUEUES"),
    ):
        client.start("q-quick", 1)


def test_parse_rate():
    assert parse_rate("100/m") == (100, 60_000)
    assert parse_rate("5/s") == (5, 1000)
    assert parse_rate("10/30s") == (10, 30_000)
    for bad in ("100/x", "0/m", "m", 100, "1/0s"):
        with pytest.raises(ValueError, match="rate"):
            parse_rate(bad)


def test_check_names_an_undeclared_queue():
    with override_settings(WEFT={"QUEUES": {"other": {}}}):
        errors = [m for m in run_checks(tags=["weft"]) if m.id == "weft.E031"]
    assert any("'q-declared'" in m.msg and "'q1'" in m.msg for m in errors)
    with override_settings(WEFT={"QUEUES": QUEUES, "OWNERSHIP": "lease"}):
        assert "weft.E032" in [m.id for m in run_checks(tags=["weft"])]
    assert registry.workflows["q-declared"].queue == "q1"


def test_parked_runs_hold_no_slot_when_the_queue_says_so(clock):
    engine = _engine(clock)
    spec = {"free1": {"concurrency": 1, "parked_holds_slot": False}}
    try:
        with override_settings(WEFT={"QUEUES": {**QUEUES, **spec}}):
            for i in range(3):
                client.start("q-wait", f"f{i}", workflow_id=f"f-{i}", queue="free1")
            engine.run_until_idle()
            # each ran its activity alone, then parked: a parked run holds no slot
            assert _statuses("f-") == ["parked", "parked", "parked"]
            assert ORDER == ["f0", "f1", "f2"]
            for i in range(3):
                client.signal(f"f-{i}", "go", i)
            engine.run_until_idle()
            done = _statuses("f-").count("completed")
            assert done >= 1
            clock.advance(1_001)
            engine.run_until_idle()
            clock.advance(1_001)
            engine.run_until_idle()
            clock.advance(1_001)
            engine.run_until_idle()
            assert _statuses("f-") == ["completed"] * 3
    finally:
        engine.dispose(grace=0)


SPANS: list[tuple[str, float, float]] = []


@activity(queue="q1")
def limited(tag):
    import time as _time

    start = _time.monotonic()
    _time.sleep(0.05)
    SPANS.append((tag, start, _time.monotonic()))
    return tag


@workflow(name="q-limited-activity")
def q_limited_activity(ctx, data):
    got = yield ctx.all(ctx.run(limited, f"{data}-a"), ctx.run(limited, f"{data}-b"))
    return got


def test_activity_queue_limits_attempts_across_runs(clock):
    SPANS.clear()
    engine = _engine(clock)
    try:
        for i in range(3):
            client.start("q-limited-activity", f"a{i}", workflow_id=f"act-{i}")
        for _ in range(60):
            engine.run_until_idle()
            if _statuses("act-") == ["completed"] * 3:
                break
            clock.advance(600)
        assert _statuses("act-") == ["completed"] * 3
        assert latest("act-0").result == ["a0-a", "a0-b"]
        spans = sorted(SPANS, key=lambda s: s[1])
        assert len(spans) == 6
        for (_, _, end), (_, start, _) in pairwise(spans):
            assert start >= end  # one attempt at a time: q1's concurrency is 1
        assert _live("q1") == 0
        assert QueueSlot.objects.filter(position__isnull=False, released=False).count() == 0
    finally:
        engine.dispose(grace=0)


def test_an_admission_stamps_its_slot_with_the_time_after_the_queue_lock(clock, monkeypatch):
    """The wait for the queue's lock may be long (its holder paused
    mid-admission): a slot stamped with the time read before that wait left
    the other admitters' rate windows early, and the chaos soak saw 5
    admissions of a 3-per-2 s queue within 1.75 s. The clock is read once the
    lock is held."""
    from weft_django.engine.maintenance import admission as queues

    real_lock = queues.lock_queue

    def slow_lock(name, db):
        clock.advance(8_000)  # the wait behind a paused holder
        real_lock(name, db)

    monkeypatch.setattr(queues, "lock_queue", slow_lock)
    engine = _engine(clock)
    try:
        client.start("q-quick", "late", workflow_id="late-1", queue="rated")
        before = clock()
        engine.run_until_idle()
        slot = QueueSlot.objects.get(workflow_id="late-1")
        assert slot.admitted_at >= before + 8_000
        # The slot carries its acquire's own instant: the rate's evidence and
        # its check read the same stamp.
        from weft_django.models import ClaimEvent

        acquire = ClaimEvent.objects.get(workflow_id="late-1", kind="acquire")
        assert slot.admitted_at == acquire.at_ms
    finally:
        engine.dispose(grace=0)


def test_a_sweeper_whose_clock_runs_ahead_keeps_the_others_rate_evidence(monkeypatch, clock):
    """Every engine reads the rate window on its own clock. An engine whose
    clock runs ahead (here by two minutes) must not delete the slots another
    engine's window still reads: that engine would count fewer admissions than
    it made and admit past the rate (the chaos soak's 4 admissions of a
    3-per-2 s queue in 1.75 s, next to a clock step)."""
    from tests.support import ManualClock
    from weft_django.engine.maintenance import admission as queues

    monkeypatch.setattr(queues, "SWEEP_CHANCE", 1.0)  # every admission sweeps
    ahead = ManualClock(clock() + 120_000)
    on_time = _engine(clock, engine_id="on-time")
    skewed = _engine(ahead, engine_id="skewed")
    try:
        for i in range(3):
            client.start("q-quick", i, workflow_id=f"w-{i}", queue="rated")
        on_time.run_until_idle()
        assert _statuses("w-") == ["completed"] * 3
        client.start("q-quick", "s", workflow_id="s-0", queue="rated")
        skewed.run_until_idle()  # its window (on its clock) is empty: it admits and sweeps
        assert latest("s-0").status == "completed"
        assert QueueSlot.objects.filter(workflow_id__startswith="w-").count() == 3
        client.start("q-quick", "late", workflow_id="w-3", queue="rated")
        clock.advance(1_000)
        on_time.run_until_idle()
        assert latest("w-3").status == "pending", "admitted past the rate: 5 in one minute"
        assert "rate limit" in (waiting_reason(latest("w-3"), now_ms=clock()) or "")
    finally:
        on_time.dispose(grace=0)
        skewed.dispose(grace=0)


def test_the_sweep_deletes_released_slots_only_past_the_skew_allowance(clock):
    from weft_django.ownership.slots import CLOCK_SKEW_ALLOWANCE_MS, forget_old

    engine = _engine(clock)
    try:
        client.start("q-quick", 0, workflow_id="old-0", queue="rated")
        engine.run_until_idle()
        admitted = QueueSlot.objects.get(workflow_id="old-0").admitted_at
        spec = build_settings({"QUEUES": QUEUES})[0].queues["rated"]
        window = spec.rate[1]
        edge = admitted + window + CLOCK_SKEW_ALLOWANCE_MS
        forget_old(spec, "default", edge)
        slot = QueueSlot.objects.get(workflow_id="old-0")
        assert slot.released, "a finished run's slot is marked released"
        forget_old(spec, "default", edge + 1)
        assert not QueueSlot.objects.filter(workflow_id="old-0").exists()
    finally:
        engine.dispose(grace=0)
