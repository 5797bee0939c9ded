"""The activity executor (``engine.executor``): the bound, overlap, timeouts, abandon.

Invariants under test: never more than ``concurrency`` attempts run; the
attempts of one submission really overlap (sync on threads, async on one
loop); a timeout cancels an async attempt for real and abandons a sync one
*and frees its slot*; an abandoned queued attempt never starts; each future
resolves once and a late result is dropped; ``activity_info()`` answers in
both kinds; the deadline and the heartbeat bound count from the start; every
abandoned-but-running thread is counted, and warned about once per name.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import wait
from typing import Any

import pytest

from tests.support import ManualClock, wait_for
from weft_django.engine.activities.executor import (
    ActivityExecutor,
    ActivityOutcome,
    Attempt,
    AttemptAbandoned,
)
from weft_django.engine.activities.info import (
    ActivityInfo,
    AttemptControl,
    activity_info,
    deadline_from_ms,
)
from weft_django.engine.workflow.activity_definition import ActivityDefinition
from weft_django.kernel.clock import wall_ms
from weft_django.ownership.metrics import ClaimMetrics

_names = iter(range(1_000_000))


def _definition(fn: Callable[..., Any], **options: Any) -> ActivityDefinition:
    """A definition with a name unique in this process (the warning is once per name)."""
    options.setdefault("is_async", asyncio.iscoroutinefunction(fn))
    return ActivityDefinition(f"exec-test-{next(_names)}-{fn.__name__}", fn, **options)


def _info(clock: Callable[[], int], position: int = 1, **control: Any) -> ActivityInfo:
    return ActivityInfo(
        workflow_id="wf-exec",
        run_id="run-1",
        position=position,
        attempt=1,
        epoch=3,
        idempotency_key=f"wf-exec:{position}",
        deadline=None,
        control=AttemptControl(clock, **control),
    )


@pytest.fixture
def make_executor() -> Iterator[Callable[..., ActivityExecutor]]:
    made: list[ActivityExecutor] = []

    def make(concurrency: int = 4, **kwargs: Any) -> ActivityExecutor:
        kwargs.setdefault("clock_ms", wall_ms)
        executor = ActivityExecutor(concurrency, **kwargs)
        made.append(executor)
        return executor

    yield make
    for executor in made:
        executor.shutdown()


def _outcome(attempt: Attempt, timeout: float = 10) -> ActivityOutcome:
    return attempt.future.result(timeout=timeout)


class Intervals:
    """Start/end times of running attempts, and the most that ran at once."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.spans: list[tuple[float, float]] = []
        self.now_running = 0
        self.most_running = 0
        self.threads: set[str] = set()

    def enter(self) -> float:
        with self.lock:
            self.now_running += 1
            self.most_running = max(self.most_running, self.now_running)
            self.threads.add(threading.current_thread().name)
        return time.monotonic()

    def leave(self, started: float) -> None:
        with self.lock:
            self.now_running -= 1
            self.spans.append((started, time.monotonic()))

    def all_overlap(self) -> bool:
        return max(s for s, _ in self.spans) < min(e for _, e in self.spans)


# --------------------------------------------------------------------------- the bound


def test_never_more_than_concurrency_attempts_run(make_executor) -> None:
    executor = make_executor(3)
    gate = threading.Event()
    spans = Intervals()

    def blocked(n: int) -> int:
        started = spans.enter()
        gate.wait(10)
        spans.leave(started)
        return n

    definition = _definition(blocked)
    attempts = [executor.submit(definition, (n,), {}, _info(wall_ms, n)) for n in range(5)]
    wait_for("three attempts running", lambda: spans.now_running == 3)
    assert (executor.running, executor.queued) == (3, 2)
    assert [a.state for a in attempts] == ["running"] * 3 + ["queued"] * 2  # FIFO
    gate.set()
    assert [_outcome(a).value for a in attempts] == [0, 1, 2, 3, 4]
    assert spans.most_running == 3
    assert executor.running == 0
    assert len(spans.threads) == 3  # queued attempts reuse the threads, never a fourth


def test_four_sync_sleepers_overlap(make_executor) -> None:
    executor = make_executor(4)
    spans = Intervals()

    def sleeper() -> None:
        started = spans.enter()
        time.sleep(0.2)
        spans.leave(started)

    definition = _definition(sleeper)
    attempts = [executor.submit(definition, (), {}, _info(wall_ms, n)) for n in range(4)]
    assert all(_outcome(a).ok for a in attempts)
    assert spans.all_overlap(), spans.spans
    assert all(name.startswith("weft-activity-") for name in spans.threads)


def test_async_attempts_overlap_on_one_loop_thread(make_executor) -> None:
    executor = make_executor(4)
    spans = Intervals()

    async def sleeper(n: int) -> int:
        started = spans.enter()
        await asyncio.sleep(0.2)
        spans.leave(started)
        return n * 10

    definition = _definition(sleeper)
    assert definition.is_async
    attempts = [executor.submit(definition, (n,), {}, _info(wall_ms, n)) for n in range(4)]
    assert [_outcome(a).value for a in attempts] == [0, 10, 20, 30]
    assert spans.all_overlap(), spans.spans
    assert spans.threads == {"weft-activity-loop"}


def test_sync_and_async_share_the_bound(make_executor) -> None:
    executor = make_executor(2)
    gate = threading.Event()

    def sync_blocked() -> str:
        gate.wait(10)
        return "sync"

    async def async_blocked() -> str:
        while not gate.is_set():
            await asyncio.sleep(0.005)
        return "async"

    first = executor.submit(_definition(sync_blocked), (), {}, _info(wall_ms, 1))
    second = executor.submit(_definition(async_blocked), (), {}, _info(wall_ms, 2))
    third = executor.submit(_definition(sync_blocked), (), {}, _info(wall_ms, 3))
    wait_for("two running", lambda: executor.running == 2)
    assert third.state == "queued"
    gate.set()
    assert [_outcome(a).value for a in (first, second, third)] == ["sync", "async", "sync"]


# --------------------------------------------------------------------------- timeouts


def test_an_async_timeout_cancels_the_coroutine_for_real(make_executor) -> None:
    executor = make_executor(2)
    after_await = threading.Event()
    cleaned_up = threading.Event()

    async def slow() -> None:
        try:
            await asyncio.sleep(30)
            after_await.set()
        finally:
            cleaned_up.set()

    definition = _definition(slow, timeout_ms=50)
    attempt = executor.submit(definition, (), {}, _info(wall_ms))
    outcome = _outcome(attempt)
    assert (outcome.ok, outcome.timed_out) == (False, True)
    assert isinstance(outcome.error, TimeoutError)
    assert str(outcome.error) == f"activity {definition.name!r} timed out after 50 ms"
    assert cleaned_up.wait(5), "the coroutine's finally never ran: it was not cancelled"
    assert not after_await.is_set()
    assert attempt.control.cancelled
    assert executor.running == 0
    assert executor.abandoned_threads == 0  # a cancelled coroutine leaves no thread behind


def test_a_sync_timeout_abandons_the_thread_and_frees_its_slot(make_executor) -> None:
    metrics = ClaimMetrics()
    executor = make_executor(4, metrics=metrics)
    release = threading.Event()
    stuck_running = threading.Semaphore(0)

    def stuck() -> str:
        stuck_running.release()
        release.wait(30)
        return "late"

    def quick() -> str:
        return "quick"

    stuck_def = _definition(stuck, timeout_ms=50)
    stuck_attempts = [executor.submit(stuck_def, (), {}, _info(wall_ms, n)) for n in range(4)]
    fifth = executor.submit(_definition(quick), (), {}, _info(wall_ms, 5))
    for attempt in stuck_attempts:
        outcome = _outcome(attempt)
        assert outcome.timed_out and isinstance(outcome.error, TimeoutError)
    # The fifth ran while all four stuck threads still block.
    assert _outcome(fifth).value == "quick"
    assert not release.is_set()
    assert executor.abandoned_threads == 4
    assert metrics.snapshot().abandoned_activity_threads == 4
    assert executor.running == 0
    release.set()
    wait_for("the stuck threads ended", lambda: executor.abandoned_threads == 0)
    # Their late results were dropped: the outcome stays the timeout.
    assert all(_outcome(a).timed_out for a in stuck_attempts)
    assert metrics.snapshot().abandoned_activity_threads == 4  # a counter, not a gauge


def test_the_deadline_counts_from_the_start_not_from_submit(make_executor) -> None:
    clock = ManualClock()
    executor = make_executor(1, clock_ms=clock)
    gate = threading.Event()
    seen: list[ActivityInfo] = []

    def first() -> None:
        gate.wait(10)

    def second() -> None:
        seen.append(activity_info())

    blocker = executor.submit(_definition(first), (), {}, _info(clock, 1))
    queued = executor.submit(_definition(second, timeout_ms=5_000), (), {}, _info(clock, 2))
    submitted_at = clock()
    clock.advance(2_000)  # time spent queued
    gate.set()
    assert _outcome(blocker).ok and _outcome(queued).ok
    expected = deadline_from_ms(submitted_at + 2_000 + 5_000)
    assert queued.info.deadline == expected
    assert seen[0].deadline == expected
    assert blocker.info.deadline is None


def test_a_timeout_on_a_fake_clock_is_seen_without_real_time_passing(make_executor) -> None:
    clock = ManualClock()
    executor = make_executor(1, clock_ms=clock)
    stop = threading.Event()

    def waits() -> None:
        stop.wait(10)

    attempt = executor.submit(_definition(waits, timeout_ms=60_000), (), {}, _info(clock))
    wait_for("started", lambda: attempt.state == "running")
    clock.advance(60_001)
    assert _outcome(attempt, timeout=5).timed_out
    stop.set()


# --------------------------------------------------------------------------- heartbeats


def test_a_missing_heartbeat_times_the_attempt_out(make_executor) -> None:
    clock = ManualClock()
    executor = make_executor(1, clock_ms=clock)
    saw_cancel = threading.Event()

    def beats() -> None:
        control = activity_info().control
        assert control is not None
        while not control.cancelled:
            time.sleep(0.005)
        saw_cancel.set()

    definition = _definition(beats, heartbeat_timeout_ms=1_000)
    attempt = executor.submit(definition, (), {}, _info(clock))
    wait_for("started", lambda: attempt.state == "running")
    clock.advance(800)
    attempt.control.last_beat_ms = clock()  # a heartbeat (what activity_info().heartbeat does)
    clock.advance(800)  # 1 600 ms since the start, 800 since the beat: not overdue
    done, _ = wait([attempt.future], timeout=0.2)
    assert not done
    clock.advance(201)  # 1 001 ms since the beat
    outcome = _outcome(attempt)
    assert outcome.timed_out and isinstance(outcome.error, TimeoutError)
    assert str(outcome.error) == (
        f"activity {definition.name!r} sent no heartbeat for 1000 ms (heartbeat_timeout)"
    )
    assert attempt.control.cancelled
    assert saw_cancel.wait(5)


def test_the_definitions_heartbeat_bound_reaches_a_control_without_one(make_executor) -> None:
    clock = ManualClock()
    executor = make_executor(1, clock_ms=clock)
    stop = threading.Event()

    def waits() -> None:
        stop.wait(10)

    attempt = executor.submit(_definition(waits, heartbeat_timeout_ms=100), (), {}, _info(clock))
    assert attempt.control.heartbeat_timeout_ms == 100
    wait_for("started", lambda: attempt.state == "running")
    clock.advance(101)
    assert _outcome(attempt).timed_out
    stop.set()


# --------------------------------------------------------------------------- abandon


def test_an_abandoned_queued_attempt_never_starts(make_executor) -> None:
    executor = make_executor(1)
    gate = threading.Event()
    started = threading.Event()

    def blocker() -> None:
        gate.wait(10)

    def never() -> None:
        started.set()

    first = executor.submit(_definition(blocker), (), {}, _info(wall_ms, 1))
    queued = executor.submit(_definition(never), (), {}, _info(wall_ms, 2))
    queued.abandon("the race was lost")
    queued.abandon("again")  # idempotent: the first reason stays
    outcome = _outcome(queued)
    assert isinstance(outcome.error, AttemptAbandoned)
    assert outcome.error.reason == "the race was lost"
    assert queued.control.cancel_reason == "the race was lost"
    gate.set()
    assert _outcome(first).ok
    after = executor.submit(_definition(lambda: "after"), (), {}, _info(wall_ms, 3))
    assert _outcome(after).value == "after"  # ran after the abandoned one's turn
    assert not started.is_set()
    assert queued.state == "abandoned"
    assert executor.abandoned_threads == 0  # no thread ever ran it


def test_abandoning_a_running_sync_attempt_drops_its_late_result(make_executor) -> None:
    metrics = ClaimMetrics()
    executor = make_executor(1, metrics=metrics)
    release = threading.Event()
    running = threading.Event()

    def slow() -> str:
        running.set()
        release.wait(10)
        return "late"

    attempt = executor.submit(_definition(slow), (), {}, _info(wall_ms))
    assert running.wait(5)
    attempt.abandon("all() failed")
    assert isinstance(_outcome(attempt).error, AttemptAbandoned)
    assert attempt.control.cancelled
    assert (executor.running, executor.abandoned_threads) == (0, 1)
    assert metrics.snapshot().abandoned_activity_threads == 1
    release.set()
    wait_for("the thread ended", lambda: executor.abandoned_threads == 0)
    assert isinstance(_outcome(attempt).error, AttemptAbandoned)
    attempt.abandon("later")  # a no-op once ended
    assert metrics.snapshot().abandoned_activity_threads == 1


def test_abandoning_a_running_async_attempt_cancels_its_task(make_executor) -> None:
    executor = make_executor(1)
    entered = threading.Event()
    cleaned_up = threading.Event()

    async def slow() -> None:
        entered.set()
        try:
            await asyncio.sleep(30)
        finally:
            cleaned_up.set()

    attempt = executor.submit(_definition(slow), (), {}, _info(wall_ms))
    assert entered.wait(5)
    attempt.abandon("run cancelled")
    assert isinstance(_outcome(attempt).error, AttemptAbandoned)
    assert cleaned_up.wait(5)
    assert executor.abandoned_threads == 0


def test_every_abandoned_thread_is_counted_but_warned_once_per_name(
    make_executor, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="weft_django.engine")
    metrics = ClaimMetrics()
    executor = make_executor(2, metrics=metrics)
    release = threading.Event()

    def stuck() -> None:
        release.wait(10)

    definition = _definition(stuck, timeout_ms=30)
    first = executor.submit(definition, (), {}, _info(wall_ms, 1))
    second = executor.submit(definition, (), {}, _info(wall_ms, 2))
    assert _outcome(first).timed_out and _outcome(second).timed_out
    other = _definition(stuck, timeout_ms=30)
    assert _outcome(executor.submit(other, (), {}, _info(wall_ms, 3))).timed_out
    release.set()
    assert metrics.snapshot().abandoned_activity_threads == 3
    events = [
        r.__dict__["weft"]["activity"]
        for r in caplog.records
        if r.name == "weft_django.engine"
        and r.__dict__.get("weft", {}).get("event") == "activity_abandoned"
    ]
    assert events == [definition.name, other.name]


# --------------------------------------------------------------------------- context & errors


def test_activity_info_answers_inside_sync_and_async(make_executor) -> None:
    executor = make_executor(2)
    seen: dict[str, ActivityInfo] = {}

    def sync_fn() -> None:
        seen["sync"] = activity_info()

    async def async_fn() -> None:
        await asyncio.sleep(0)
        seen["async"] = activity_info()

    a = executor.submit(_definition(sync_fn), (), {}, _info(wall_ms, 4))
    b = executor.submit(_definition(async_fn, timeout_ms=5_000), (), {}, _info(wall_ms, 5))
    assert _outcome(a).ok and _outcome(b).ok
    assert seen["sync"] is a.info and seen["sync"].idempotency_key == "wf-exec:4"
    assert seen["async"] is b.info and seen["async"].deadline is not None
    with pytest.raises(RuntimeError, match="outside a running activity"):
        activity_info()  # nothing leaked into the caller's context


def test_the_callers_context_variables_are_copied(make_executor) -> None:
    import contextvars

    var: contextvars.ContextVar[str] = contextvars.ContextVar("exec_test_var", default="unset")
    executor = make_executor(2)
    token = var.set("from the turn")
    try:
        sync_attempt = executor.submit(_definition(var.get), (), {}, _info(wall_ms, 1))

        async def read() -> str:
            return var.get()

        async_attempt = executor.submit(_definition(read), (), {}, _info(wall_ms, 2))
    finally:
        var.reset(token)
    assert _outcome(sync_attempt).value == "from the turn"
    assert _outcome(async_attempt).value == "from the turn"


def test_exceptions_become_error_outcomes_and_the_worker_survives(make_executor) -> None:
    initialized: list[str] = []
    executor = make_executor(
        1, thread_initializer=lambda: initialized.append(threading.current_thread().name)
    )
    names: list[str] = []

    def fails(kind: str) -> None:
        names.append(threading.current_thread().name)
        if kind == "value":
            raise ValueError("card declined")
        raise SystemExit(3)

    async def afails() -> None:
        raise KeyError("missing")

    definition = _definition(fails)
    value_error = _outcome(executor.submit(definition, ("value",), {}, _info(wall_ms, 1)))
    system_exit = _outcome(executor.submit(definition, ("exit",), {}, _info(wall_ms, 2)))
    async_error = _outcome(executor.submit(_definition(afails), (), {}, _info(wall_ms, 3)))
    assert isinstance(value_error.error, ValueError) and not value_error.timed_out
    assert isinstance(system_exit.error, SystemExit)
    assert isinstance(async_error.error, KeyError)
    assert names == ["weft-activity-1", "weft-activity-1"]  # one persistent thread
    assert initialized == ["weft-activity-1"]  # the initializer ran once, first


def test_a_plain_function_returning_a_coroutine_is_an_error(make_executor) -> None:
    executor = make_executor(1)

    async def inner() -> int:
        return 1

    def sneaky() -> Any:
        return inner()

    outcome = _outcome(executor.submit(_definition(sneaky), (), {}, _info(wall_ms)))
    assert isinstance(outcome.error, TypeError)
    assert "async def" in str(outcome.error)


# --------------------------------------------------------------------------- shutdown


def test_shutdown_abandons_queued_cancels_async_and_refuses_more(make_executor) -> None:
    executor = make_executor(1)
    entered = threading.Event()
    cleaned_up = threading.Event()

    async def slow() -> None:
        entered.set()
        try:
            await asyncio.sleep(30)
        finally:
            cleaned_up.set()

    running = executor.submit(_definition(slow), (), {}, _info(wall_ms, 1))
    queued = executor.submit(_definition(lambda: None), (), {}, _info(wall_ms, 2))
    assert entered.wait(5)
    executor.shutdown(wait=True)
    assert cleaned_up.is_set()
    for attempt in (running, queued):
        assert isinstance(_outcome(attempt).error, AttemptAbandoned)
    with pytest.raises(RuntimeError, match="shut down"):
        executor.submit(_definition(lambda: None), (), {}, _info(wall_ms, 3))


@pytest.mark.parametrize("bad", [0, -1, True, 2.0])
def test_concurrency_must_be_a_positive_integer(bad: Any) -> None:
    with pytest.raises(ValueError, match=f"got {bad!r}"):
        ActivityExecutor(bad, clock_ms=wall_ms)
