"""The concurrent runtime with real ``weft_worker`` processes on PostgreSQL (issue #14).

What the in-process tests (``tests/e2e/test_concurrent_commands.py``) cannot
show: that a polling engine *process* runs a ``ctx.all``'s activities at
once on its executor's threads, that a SIGKILL during a ``ctx.all`` loses
only the branches still running, that a graceful stop records the branches
in flight, that a cancel reaches a heartbeating activity in another process,
that a stalled attempt is timed out by its heartbeat bound and retried, and
that a turn crashing on a bug ends ``suspended`` after bounded retries.

Children are started by ``tests/engines/harness.py`` (short claim timings:
TTL 3 s, renew 1 s) with the workflows of ``tests/engines/workflows.py``,
and killed as whole process groups in a ``finally``. Evidence is durable
only: ``SideEffect`` rows the activities write before they return (one per
execution), ``JournalEntry``, ``ClaimEvent``, ``Timer``, ``WorkflowRun``,
the API's run detail. No assertion compares a duration: concurrency is read
from the recorded intervals overlapping, never from a wall-time ratio; every
wait is a poll bounded by a timeout that is hang protection only.

PostgreSQL only (asserted); the ``processes`` marker keeps them off the
SQLite leg.
"""

from __future__ import annotations

import signal
from collections import Counter
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.contrib.auth.models import Permission
from django.db import connection
from rest_framework.test import APIClient

from project.demo.models import SideEffect
from tests.engines.harness import (
    HANG_TIMEOUT_S,
    Worker,
    assert_journal_fenced,
    events_of,
    journal,
    side_effect_counts,
    wait_for,
)
from tests.engines.workflows import CANCELLED, END, IMPORTS, STALL_S, START, procs_stalling
from weft_django import client
from weft_django.engine.turn.failures import retry_delay_ms
from weft_django.engine.workflow.definitions import activity_definition
from weft_django.models import ActivityHeartbeat, JournalEntry, Timer, WorkflowClaim, WorkflowRun

pytestmark = [pytest.mark.processes, pytest.mark.django_db(transaction=True)]

RESULT_TIMEOUT_S = 30.0  # hang protection (a takeover waits out TTL + grace, ~5 s)
#: "Within a few seconds": a cancel reaches the activity at its next refused
#: heartbeat (at most 1 s apart) or the turn's next look at its run (<= 1 s).
CANCEL_SEEN_S = 5.0
SHORT_S = 0.2
LONG_S = 3.0


def _worker(name: str, tmp_path: Any, *extra: str, **env: str) -> Worker:
    return Worker(name, tmp_path, *extra, env=env or None, imports=IMPORTS)


def _intervals(key: str) -> dict[str, list[tuple[str, datetime]]]:
    """Every ``START`` / ``END`` row of the workflow key, by branch, in time order."""
    rows = SideEffect.objects.filter(kind__in=(START, END), key__startswith=f"{key}:")
    marks: dict[str, list[tuple[str, datetime]]] = {}
    for row in rows.order_by("at", "id"):
        marks.setdefault(row.key, []).append((row.kind, row.at))
    return marks


def _one_span_each(key: str, branches: list[str]) -> dict[str, tuple[datetime, datetime]]:
    """The (start, end) of each branch, which ran exactly once."""
    marks = _intervals(key)
    assert sorted(marks) == sorted(branches), marks
    spans = {}
    for branch, seen in marks.items():
        assert [kind for kind, _ in seen] == [START, END], (branch, seen)
        spans[branch] = (seen[0][1], seen[1][1])
    return spans


def _assert_all_overlap(spans: dict[str, tuple[datetime, datetime]]) -> timedelta:
    """Every pair of intervals overlaps: the last to start began before the
    first to end ended (so all were running at that moment). Returns how long
    all of them ran together (printed, never compared)."""
    latest_start = max(start for start, _ in spans.values())
    earliest_end = min(end for _, end in spans.values())
    assert latest_start < earliest_end, {
        b: (s.isoformat(), e.isoformat()) for b, (s, e) in spans.items()
    }
    return earliest_end - latest_start


def _activity_entries(run_id: str) -> list[JournalEntry]:
    return [e for e in journal(run_id) if e.kind == "activity"]


def test_all_of_four_activities_runs_them_at_once_in_an_engine_process(tmp_path):
    assert connection.vendor == "postgresql"
    key = "overlap"
    worker = _worker("procs-overlap", tmp_path)
    try:
        worker.wait_booted()
        handle = client.start(
            "procs-fan-out", {"id": key, "seconds": [1.0] * 4}, workflow_id="procs-overlap"
        )
        branches = [f"{key}:{i}" for i in range(4)]
        assert handle.result(timeout=RESULT_TIMEOUT_S) == branches

        together = _assert_all_overlap(_one_span_each(key, branches))
        # Each result was recorded once, by this engine, and the run ended with them.
        entries = _activity_entries(handle.run_id)
        assert sorted(e.result for e in entries) == branches
        assert {e.engine_id for e in entries} == {worker.engine_id}
        print(f"\n[overlap] all four ran together for {together}")
    finally:
        worker.kill()


def test_sigkill_during_all_reruns_only_the_unfinished_branches(tmp_path):
    """``ctx.all(long, short, long, short)``: the engine is SIGKILLed once the
    two short branches are recorded; the next owner runs the two long ones
    again (at once) and never the short ones; the result is in command order
    although the branches were recorded in another."""
    assert connection.vendor == "postgresql"
    key = "crash-all"
    workflow_id = "procs-crash-all"
    seconds = [LONG_S, SHORT_S, LONG_S, SHORT_S]
    branches = [f"{key}:{i}" for i in range(4)]
    long_branches, short_branches = branches[0::2], branches[1::2]
    workers: list[Worker] = []
    try:
        first = _worker("procs-crash-w1", tmp_path)
        workers.append(first)
        first.wait_booted()
        handle = client.start(
            "procs-fan-out", {"id": key, "seconds": seconds}, workflow_id=workflow_id
        )

        def two_recorded() -> list[JournalEntry] | None:
            entries = _activity_entries(handle.run_id)
            return entries if len(entries) >= 2 else None

        recorded = wait_for("the two short branches recorded", two_recorded, first)
        first.kill()  # SIGKILL to the whole process group, then reaped
        assert first.proc.returncode == -signal.SIGKILL
        # At the kill: the short branches were recorded, all four had started,
        # the long ones had not ended.
        assert sorted(e.result for e in recorded) == short_branches
        assert side_effect_counts(key, START) == Counter({b: 1 for b in branches})
        assert side_effect_counts(key, END) == Counter({b: 1 for b in short_branches})

        second = _worker("procs-crash-w2", tmp_path)
        workers.append(second)
        assert handle.result(timeout=RESULT_TIMEOUT_S) == branches

        # Executions per branch: the recorded ones once, the unfinished ones twice.
        starts = side_effect_counts(key, START)
        assert starts == Counter(
            {**{b: 2 for b in long_branches}, **{b: 1 for b in short_branches}}
        )
        # The long branches' first executions died with the engine (no END).
        assert side_effect_counts(key, END) == Counter({b: 1 for b in branches})
        # The new owner ran the two again at once: its two executions overlap.
        marks = _intervals(key)
        reruns = {}
        for branch in long_branches:
            kinds = [kind for kind, _ in marks[branch]]
            assert kinds == [START, START, END], (branch, marks[branch])
            reruns[branch] = (marks[branch][1][1], marks[branch][2][1])
        _assert_all_overlap(reruns)

        events = events_of(workflow_id)
        assert [(e.kind, e.epoch, e.engine_id) for e in events] == [
            ("acquire", 1, first.engine_id),
            ("takeover", 2, second.engine_id),
            ("release", 2, second.engine_id),
        ], events
        entries = journal(handle.run_id)
        assert_journal_fenced(entries, events)
        by_epoch = {
            epoch: sorted(e.result for e in _activity_entries(handle.run_id) if e.epoch == epoch)
            for epoch in (1, 2)
        }
        assert by_epoch == {1: short_branches, 2: long_branches}, by_epoch
        assert len(_activity_entries(handle.run_id)) == 4
    finally:
        for worker in workers:
            worker.kill()


def test_sigterm_during_all_records_the_branches_in_flight(tmp_path):
    """A graceful stop while four branches run: the engine starts nothing new,
    records each branch as it lands within its grace, releases the claim and
    exits 0; the next engine runs only the step after the ``ctx.all``."""
    assert connection.vendor == "postgresql"
    key = "term-all"
    workflow_id = "procs-term-all"
    branches = [f"{key}:{i}" for i in range(4)]
    workers: list[Worker] = []
    try:
        first = _worker("procs-term-w1", tmp_path, "--grace", "10")
        workers.append(first)
        first.wait_booted()
        handle = client.start(
            "procs-fan-out",
            {"id": key, "seconds": [1.0] * 4, "after": 0.0},
            workflow_id=workflow_id,
        )
        wait_for(
            "all four branches running",
            lambda: side_effect_counts(key, START) == Counter({b: 1 for b in branches}),
            first,
        )
        first.signal_group(signal.SIGTERM)
        assert first.proc.wait(timeout=HANG_TIMEOUT_S) == 0, first.log()
        assert "Traceback" not in first.log(), first.log()
        # Every branch in flight was recorded by the stopping engine; the step
        # after them was not started.
        recorded = _activity_entries(handle.run_id)
        assert sorted(e.result for e in recorded) == branches, [
            (e.result, e.epoch) for e in recorded
        ]
        assert {(e.engine_id, e.epoch) for e in recorded} == {(first.engine_id, 1)}
        assert f"{key}:after" not in side_effect_counts(key, START)
        assert WorkflowRun.objects.get(pk=handle.run_id).status == "running"

        second = _worker("procs-term-w2", tmp_path)
        workers.append(second)
        assert handle.result(timeout=RESULT_TIMEOUT_S) == [*branches, f"{key}:after"]
        assert side_effect_counts(key, START) == Counter(
            {b: 1 for b in [*branches, f"{key}:after"]}
        )
        events = events_of(workflow_id)
        assert [(e.kind, e.epoch, e.engine_id) for e in events] == [
            ("acquire", 1, first.engine_id),
            ("release", 1, first.engine_id),
            ("acquire", 2, second.engine_id),  # released, so acquired: no takeover
            ("release", 2, second.engine_id),
        ], events
        assert_journal_fenced(journal(handle.run_id), events)
        [after] = [e for e in _activity_entries(handle.run_id) if e.epoch == 2]
        assert (after.result, after.engine_id) == (f"{key}:after", second.engine_id)
    finally:
        for worker in workers:
            worker.kill()


def test_sigterm_while_a_sleep_of_the_all_comes_due_waits_for_the_activity(tmp_path):
    """``ctx.all(activity, sleep)`` with SIGTERM before the sleep is due: the
    stopping engine does not act on the due sleep (it starts nothing new) and
    must not spin on it either -- it waits for the running activity, records
    it, and stops at the checkpoint. Spinning, the turn would exhaust its
    step bound: a failed turn counted on the run, the activity's result lost
    and run again by the next engine."""
    assert connection.vendor == "postgresql"
    key = "term-sleep"
    workflow_id = "procs-term-sleep"
    branch = f"{key}:0"
    workers: list[Worker] = []
    try:
        first = _worker("procs-term-sleep-w1", tmp_path, "--grace", "10")
        workers.append(first)
        first.wait_booted()
        handle = client.start(
            "procs-all-with-sleep",
            {"id": key, "seconds": LONG_S, "sleep": SHORT_S},
            workflow_id=workflow_id,
        )

        def sleep_armed() -> bool:  # the activity runs and the sleep's timer is durable
            timers = Timer.objects.filter(run_id=handle.run_id, kind="sleep")
            return side_effect_counts(key, START) == Counter({branch: 1}) and timers.exists()

        wait_for("the activity running and the sleep armed", sleep_armed, first)
        first.signal_group(signal.SIGTERM)
        assert first.proc.wait(timeout=HANG_TIMEOUT_S) == 0, first.log()
        log = first.log()
        assert "Traceback" not in log and "did not settle" not in log, log[-4000:]
        assert f"turn of {workflow_id} stopped at a checkpoint: engine stopping" in log, log
        run = WorkflowRun.objects.get(pk=handle.run_id)
        assert (run.status, run.turn_failures, run.turn_retry_at) == ("running", 0, None)
        [recorded] = _activity_entries(handle.run_id)
        assert (recorded.result, recorded.engine_id, recorded.epoch) == (
            branch,
            first.engine_id,
            1,
        )

        second = _worker("procs-term-sleep-w2", tmp_path)
        workers.append(second)
        assert handle.result(timeout=RESULT_TIMEOUT_S) == [branch, None]
        assert side_effect_counts(key, START) == Counter({branch: 1})  # ran once
    finally:
        for worker in workers:
            worker.kill()


def test_cancel_reaches_a_heartbeating_activity_and_its_result_is_discarded(
    tmp_path, django_user_model
):
    assert connection.vendor == "postgresql"
    key = "beating"
    workflow_id = "procs-beating"
    staff = django_user_model.objects.create_user("procs-staff", is_staff=True)
    # Heartbeat details are payloads: shown to holders of weft.view_payload only.
    staff.user_permissions.add(Permission.objects.get(codename="view_payload"))
    api = APIClient()
    api.force_login(staff)
    worker = _worker("procs-cancel", tmp_path)
    try:
        worker.wait_booted()
        handle = client.start("procs-beating", {"id": key}, workflow_id=workflow_id)

        def heartbeats() -> list[dict[str, Any]]:
            response = api.get(f"/api/weft/workflows/{workflow_id}/")
            assert response.status_code == 200, response.content
            return response.json()["heartbeats"]

        [first] = wait_for("a heartbeat in the API", heartbeats, worker)
        assert (first["attempt"], first["engine_id"]) == (1, worker.engine_id)
        assert first["epoch"] == 1 and first["details"]["beat"] >= 1, first

        def progressed() -> dict[str, Any] | None:
            beats = heartbeats()
            later = beats[0] if beats else None
            return later if later and later["details"]["beat"] > first["details"]["beat"] else None

        later = wait_for("the heartbeat's progress in the API", progressed, worker)
        assert later["beat_at"] > first["beat_at"]
        assert handle.status() == "running"  # the turn waits on its running attempt

        client.cancel(workflow_id, "enough")
        seen = wait_for(
            "the activity to see ActivityCancelled",
            lambda: SideEffect.objects.filter(kind=CANCELLED, key__startswith=f"{key}:").first(),
            worker,
            timeout=CANCEL_SEEN_S,
        )
        # The turn learnt it first (it abandons the attempt) or the heartbeat's
        # fenced write was refused: either way the reason is the run's status.
        assert seen.key.removeprefix(f"{key}:") in {"the run is cancelled", "run is cancelled"}, (
            seen
        )
        # The activity then returned a value anyway; the turn that started it
        # has ended (aborted, or deposed by the cancel's claim rotation)
        # without recording it.
        ended = (f"turn of {workflow_id} aborted", f"deposed from {workflow_id}")
        wait_for(
            "the turn to end",
            lambda: any(text in worker.log() for text in ended),
            worker,
            timeout=CANCEL_SEEN_S,
        )
        run = WorkflowRun.objects.get(pk=handle.run_id)
        assert run.status == "cancelled", run.status
        assert _activity_entries(handle.run_id) == []
        assert SideEffect.objects.filter(kind=START, key=key).count() == 1  # ran once
        assert "Traceback" not in worker.log(), worker.log()
    finally:
        worker.kill()


def test_a_stalled_attempt_times_out_on_its_heartbeat_bound_and_is_retried(tmp_path):
    """``@activity(heartbeat_timeout=0.3, retries=1)``: attempt 1 heartbeats
    once and stalls far longer than the bound; it fails as timed out (the
    retry timer carries the error), attempt 2 succeeds, the run completes with
    attempt 2's value -- attempt 1's late value would be ``...:stale``."""
    assert connection.vendor == "postgresql"
    key = "stall"
    worker = _worker("procs-stall", tmp_path)
    try:
        worker.wait_booted()
        handle = client.start("procs-stalling", {"id": key}, workflow_id="procs-stall")
        retry = wait_for(
            "the retry timer of attempt 1",
            lambda: Timer.objects.filter(run_id=handle.run_id, kind="retry").first(),
            worker,
            timeout=STALL_S,  # past it, attempt 1 would have returned on its own
        )
        assert retry.payload["attempt"] == 2, retry.payload
        definition = activity_definition(procs_stalling)
        assert definition is not None
        name = definition.name
        assert retry.payload["error"] == (
            f"TimeoutError: activity {name!r} sent no heartbeat for 300 ms (heartbeat_timeout)"
        ), retry.payload

        assert handle.result(timeout=RESULT_TIMEOUT_S) == f"{key}:ok:2"
        assert side_effect_counts(key, START) == Counter({f"{key}:1": 1, f"{key}:2": 1})
        [entry] = _activity_entries(handle.run_id)
        assert (entry.result, entry.error) == (f"{key}:ok:2", None)
        beat = ActivityHeartbeat.objects.get(run_id=handle.run_id)
        assert (beat.attempt, beat.details) == (2, {"attempt": 2})
        assert not Timer.objects.filter(run_id=handle.run_id).exists()
        # The stalled sync thread cannot be killed: the engine said so.
        assert f'activity "{name}" was abandoned while its thread was still running' in (
            worker.log()
        ), worker.log()
    finally:
        worker.kill()


def test_a_turn_crashing_on_a_bug_is_retried_then_suspended_in_an_engine_process(tmp_path):
    """The process variant of ``tests/e2e/test_turn_failures.py``: a signal
    handler that raises makes every turn of the run fail; the engine backs
    off (1 s) and, at ``TURN_MAX_FAILURES`` (2 here), suspends the run with
    the error and releases the claim -- no hot loop, never ``running`` with
    nothing recorded."""
    assert connection.vendor == "postgresql"
    workflow_id = "procs-bad-handler"
    limit = 2
    worker = _worker("procs-turnfail", tmp_path, WEFT_TURN_MAX_FAILURES=str(limit))
    try:
        worker.wait_booted()
        handle = client.start("procs-bad-handler", None, workflow_id=workflow_id)
        wait_for("the run parked", lambda: handle.status() == "parked", worker)
        client.signal(workflow_id, "boom", 1)

        def suspended() -> WorkflowRun | None:
            run = WorkflowRun.objects.get(pk=handle.run_id)
            return run if run.status == "suspended" else None

        run = wait_for(
            "the run suspended after its failed turns",
            suspended,
            worker,
            timeout=retry_delay_ms(1) / 1000 + HANG_TIMEOUT_S,
        )
        assert (run.turn_failures, run.turn_retry_at) == (limit, None)
        assert run.error["type"] == "ValueError", run.error
        assert "handler refuses 1" in run.error["message"]
        assert "ValueError" in run.error["traceback"]
        assert f"turn failed {limit} times" in run.suspended_reason
        claim = WorkflowClaim.objects.get(pk=workflow_id)
        assert claim.engine_id is None  # released
        # The log line follows the commit that suspended the run: wait for it.
        suspended_line = f"workflow {workflow_id} (run {run.pk}) suspended"
        wait_for("the suspension logged", lambda: suspended_line in worker.log(), worker)
        log = worker.log()
        retried = [line for line in log.splitlines() if f"turn of {workflow_id} (run" in line]
        assert len(retried) == limit - 1 and "(1 of 2); retried in" in retried[0], log[-4000:]
    finally:
        worker.kill()
