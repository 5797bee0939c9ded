"""Queues with fenced flow control across real ``weft_worker`` processes (issue #16).

Audited from durable records: each run's activity returns the wall-clock
interval it ran in, so the journal holds when every run held its slot; the
attempts a SIGKILL cut short (never journaled) are read from the attempt
log each attempt appends to before it sleeps, and count until the kill.
Every wait is a poll bounded by a timeout that is hang protection only.
PostgreSQL only (``processes`` marker).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
from django.db import connection
from django.test import override_settings

from tests.engines.harness import Worker, wait_for
from tests.engines.queue_workflows import IMPORTS, QUEUES
from weft_django import client
from weft_django.kernel.clock import wall_ms
from weft_django.models import ClaimEvent, JournalEntry, QueueSlot, WorkflowRun

pytestmark = [pytest.mark.processes, pytest.mark.django_db(transaction=True)]

DONE_TIMEOUT_S = 180.0  # hang protection only (a loaded machine, a 3 s TTL)


def _workers(tmp_path: Path, names: Iterable[str], log: Path) -> list[Worker]:
    env = {"WEFT_QUEUES": json.dumps(QUEUES), "WEFT_QUEUE_LOG": str(log)}
    return [Worker(name, tmp_path, env=env, imports=IMPORTS) for name in names]


def _intervals(run_ids: list[str]) -> list[tuple[int, int, str]]:
    out = []
    for entry in JournalEntry.objects.filter(run_id__in=run_ids):
        result = entry.result
        if isinstance(result, dict) and "start" in result and "end" in result:
            out.append((result["start"], result["end"], result["key"]))
    return out


def _admissions(run_ids: list[str], seen: dict[int, int] | None = None) -> list[int]:
    """Admission instants (epoch ms) that count for the rate, from the slot rows the
    admitting batches wrote, sorted. The queue sweep deletes released rows once they
    leave the rate window, so a caller that polls passes ``seen`` (slot pk -> instant)
    to keep every admission it has observed."""
    slots = QueueSlot.objects.filter(run_id__in=run_ids, counts_for_rate=True)
    rows = dict(slots.values_list("pk", "admitted_at"))
    if seen is None:
        return sorted(rows.values())
    seen.update(rows)
    return sorted(seen.values())


def _max_overlap(intervals: Iterable[tuple[int, int, Any]]) -> int:
    edges = []
    for start, end, _ in intervals:
        edges += [(start, 1), (end, -1)]
    edges.sort(key=lambda e: (e[0], e[1]))  # an end before a start at the same ms
    most = now = 0
    for _, step in edges:
        now += step
        most = max(most, now)
    return most


def _all_completed(run_ids: list[str]) -> bool:
    return WorkflowRun.objects.filter(pk__in=run_ids, status="completed").count() == len(run_ids)


def _attempts(log: Path) -> list[tuple[str, int, int]]:
    if not log.exists():
        return []
    rows = []
    for line in log.read_text().splitlines():
        key, start, pid = line.split()
        rows.append((key, int(start), int(pid)))
    return rows


@override_settings(WEFT={"QUEUES": QUEUES})
def test_concurrency_two_across_a_sigkilled_slot_holder(tmp_path):
    assert connection.vendor == "postgresql"
    log = tmp_path / "attempts.log"
    workers = _workers(tmp_path, ["q-w1", "q-w2", "q-w3"], log)
    try:
        for worker in workers:
            worker.wait_booted()
        handles = [
            client.start(
                "procs-queue-slow",
                {"key": f"c{i}", "seconds": 0.5},
                workflow_id=f"qc-{i}",
                queue="procs-q2",
            )
            for i in range(12)
        ]
        run_ids = [h.run_id for h in handles]

        def holder_in_flight() -> tuple[Worker, str] | None:
            # A run whose activity is under way (started, not journaled) and its engine.
            done = {k for _, _, k in _intervals(run_ids)}
            started = {key for key, _, _ in _attempts(log)}
            for key in sorted(started - done):
                run = WorkflowRun.objects.filter(workflow_id=f"q{key[0]}-{key[1:]}").first()
                holder = (
                    ClaimEvent.objects.filter(workflow_id=f"q{key[0]}-{key[1:]}")
                    .order_by("-id")
                    .values_list("engine_id", flat=True)
                    .first()
                )
                if run is not None and run.status == "running" and holder:
                    for worker in workers:
                        if worker.engine_id == holder and len(done) >= 2:
                            return worker, key
            return None

        victim, key = wait_for("a slot holder mid-activity", holder_in_flight, *workers)
        kill_ms = wall_ms()
        victim.kill()
        survivors = [w for w in workers if w is not victim]
        wait_for(
            "all 12 runs completed",
            lambda: _all_completed(run_ids),
            *survivors,
            timeout=DONE_TIMEOUT_S,
            interval=0.2,
        )
        journaled = _intervals(run_ids)
        assert sorted(k for _, _, k in journaled) == sorted(f"c{i}" for i in range(12))
        assert _max_overlap(journaled) <= 2, sorted(journaled)
        # The attempts the kill cut short held their slot until the kill.
        cut = [
            (start, kill_ms, k)
            for k, start, pid in _attempts(log)
            if pid == victim.proc.pid
            and start <= kill_ms
            and not any(j[2] == k and j[0] == start for j in journaled)
        ]
        assert cut, "the victim had an attempt in flight"
        assert _max_overlap(journaled + cut) <= 2, sorted(journaled + cut)
        took_over = ClaimEvent.objects.filter(kind="takeover", workflow_id__startswith="qc-")
        assert took_over.exists()
        print(f"\nqueue concurrency=2: victim {victim.engine_id} held {key}; cut {len(cut)}")
    finally:
        for worker in workers:
            worker.kill()


@override_settings(WEFT={"QUEUES": QUEUES})
def test_per_key_limit_across_engines(tmp_path):
    assert connection.vendor == "postgresql"
    log = tmp_path / "attempts.log"
    workers = _workers(tmp_path, ["k-w1", "k-w2"], log)
    try:
        for worker in workers:
            worker.wait_booted()
        keys = ["a", "a", "a", "b", "b", "b", "c", "c"]
        handles = [
            client.start(
                "procs-queue-slow",
                {"key": f"{k}{i}", "seconds": 0.4},
                workflow_id=f"qk-{i}",
                queue="procs-keyed",
                concurrency_key=k,
            )
            for i, k in enumerate(keys)
        ]
        run_ids = [h.run_id for h in handles]
        wait_for(
            "all keyed runs completed",
            lambda: _all_completed(run_ids),
            *workers,
            timeout=DONE_TIMEOUT_S,
            interval=0.2,
        )
        journaled = _intervals(run_ids)
        for k in "abc":
            mine = [j for j in journaled if j[2].startswith(k)]
            assert _max_overlap(mine) <= 1, (k, sorted(mine))
    finally:
        for worker in workers:
            worker.kill()


@override_settings(WEFT={"QUEUES": QUEUES})
def test_priorities_higher_first_then_fifo(tmp_path):
    assert connection.vendor == "postgresql"
    log = tmp_path / "attempts.log"
    workers = _workers(tmp_path, ["p-w1"], log)
    try:
        workers[0].wait_booted()
        blocker = client.start(
            "procs-queue-slow",
            {"key": "blocker", "seconds": 1.5},
            workflow_id="qp-blocker",
            queue="procs-q1",
        )
        wait_for("the blocker to hold the slot", lambda: _attempts(log), *workers)
        order = [("p0", 0), ("p1", 5), ("p2", 0), ("p3", 9), ("p4", 5), ("p5", -1)]
        handles = [
            client.start(
                "procs-queue-slow",
                {"key": key, "seconds": 0.05},
                workflow_id=f"qp-{key}",
                queue="procs-q1",
                priority=priority,
            )
            for key, priority in order
        ]
        run_ids = [blocker.run_id, *(h.run_id for h in handles)]
        wait_for(
            "all prioritised runs completed",
            lambda: _all_completed(run_ids),
            *workers,
            timeout=DONE_TIMEOUT_S,
            interval=0.2,
        )
        started = [k for _, _, k in sorted(_intervals(run_ids))]
        assert started == ["blocker", "p3", "p1", "p4", "p0", "p2", "p5"]
    finally:
        for worker in workers:
            worker.kill()


@override_settings(WEFT={"QUEUES": QUEUES})
def test_rate_limit_held_within_ten_percent_over_a_minute(tmp_path):
    assert connection.vendor == "postgresql"
    log = tmp_path / "attempts.log"
    workers = _workers(tmp_path, ["r-w1", "r-w2"], log)
    rate, period_ms = 60, 60_000
    try:
        for worker in workers:
            worker.wait_booted()
        handles = [
            client.start(
                "procs-queue-slow",
                {"key": f"r{i}", "seconds": 0},
                workflow_id=f"qr-{i}",
                queue="procs-rated",
            )
            for i in range(int(rate * 1.6))
        ]
        run_ids = [h.run_id for h in handles]
        # The rate limits admissions: measure the admission instants (the slot
        # rows' ``admitted_at``, written in the admitting batch), not the
        # activities' own start, which lags by however busy the machine is.
        seen: dict[int, int] = {}
        wait_for("the first admission", lambda: _admissions(run_ids, seen), *workers)
        first = min(seen.values())
        wait_for(
            "a minute and a bit since the first admission",
            lambda: bool(_admissions(run_ids, seen)) and wall_ms() > first + period_ms + 3_000,
            *workers,
            timeout=DONE_TIMEOUT_S,
            interval=0.5,
        )
        starts = _admissions(run_ids, seen)
        in_first_minute = sum(1 for s in starts if s < first + period_ms)
        assert rate * 0.9 <= in_first_minute <= rate * 1.1, (in_first_minute, starts)
        busiest = max(sum(1 for s in starts if t <= s < t + period_ms) for t in starts)
        assert busiest <= rate * 1.1, busiest
        assert len(starts) > in_first_minute  # and the next window admits again
        print(f"\nrate 60/m: {in_first_minute} in the first minute, busiest window {busiest}")
    finally:
        for worker in workers:
            worker.kill()
