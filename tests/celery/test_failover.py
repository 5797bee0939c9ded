"""Failures of Celery nodes with real workers (SPEC §2 "Engines", §4.4).

- Two nodes (prefork, concurrency 2); one is SIGKILLed as a whole process
  group mid-load: the other takes its claims over — before they expire when
  the dead node's database session ended (``SESSION_PRESENCE``, the
  default), only once they expired (grace included) with it off — and every
  workflow completes; each recorded step ran once, but for the turn that was
  in flight in each killed pool process.
- A pool child killed mid-turn on a live node: the node's own maintenance
  re-drives the run (its turn process is gone) without any takeover.

Safety is read from durable records (``ClaimEvent``, ``JournalEntry``,
``SideEffect``), never from wall-clock durations. PostgreSQL only.
"""

from __future__ import annotations

import os
import signal
from collections import Counter, defaultdict

import pytest

from project.demo.models import SideEffect
from tests.celery.conftest import REDIS_URL, CeleryWorker, wait_for
from weft_django import client
from weft_django.kernel.clock import wall_ms
from weft_django.models import ClaimEvent, JournalEntry, WorkflowClaim, WorkflowRun
from weft_django.ownership import WORKFLOW_CLAIM_TAKEOVER_GRACE_MULTIPLIER

pytestmark = [pytest.mark.processes]

GRACE_MS = WORKFLOW_CLAIM_TAKEOVER_GRACE_MULTIPLIER * 1_000  # WEFT_TEST_TIMINGS: renew 1 s


def slow_counts(prefix: str) -> Counter[str]:
    rows = SideEffect.objects.filter(kind="slow", key__startswith=prefix)
    return Counter(rows.values_list("key", flat=True))


def assert_journal_fenced(run_id: str, workflow_id: str) -> None:
    """Each entry was written under an epoch some event granted to its engine."""
    granting = ClaimEvent.objects.filter(workflow_id=workflow_id, kind__in=("acquire", "takeover"))
    granted = {e.epoch: e.engine_id for e in granting}
    previous = 0
    for entry in JournalEntry.objects.filter(run_id=run_id).order_by("position"):
        assert granted.get(entry.epoch) == entry.engine_id, (entry.position, entry.epoch, granted)
        assert entry.epoch >= previous
        previous = entry.epoch


@pytest.mark.parametrize("path", ["session", "ttl"])
@pytest.mark.django_db(transaction=True)
def test_a_killed_node_is_taken_over_and_recorded_steps_run_once(
    postgres, celery_app, workers, tmp_path, path
):
    env = {"WEFT_SESSION_PRESENCE": "1" if path == "session" else "0"}
    first = CeleryWorker("node-a", tmp_path, REDIS_URL, env=env)
    second = CeleryWorker("node-b", tmp_path, REDIS_URL, env=env)
    workers.extend([first, second])
    first.wait_ready()
    second.wait_ready()
    steps = 4
    handles = [
        client.start(
            "slow-chain", {"id": f"k{i}", "steps": steps, "seconds": 0.3}, workflow_id=f"kill-{i}"
        )
        for i in range(8)
    ]

    def first_is_busy() -> list[str]:
        held = list(
            WorkflowClaim.objects.filter(engine_id=first.engine_id).values_list(
                "workflow_id", flat=True
            )
        )
        return held if held and sum(slow_counts("k").values()) >= 4 else []

    held_by_first = wait_for("node a to hold claims mid-load", first_is_busy, first, second)
    kill_ms = wall_ms()
    first.kill()  # SIGKILL to the main process and its pool children at once
    assert first.proc.returncode == -signal.SIGKILL

    for i, handle in enumerate(handles):
        assert handle.result(timeout=60) == [f"k{i}:{s}" for s in range(steps)]
    done_ms = wall_ms()

    counts = slow_counts("k")
    assert set(counts) == {f"k{i}:{s}" for i in range(8) for s in range(steps)}
    again = {key: n for key, n in counts.items() if n > 1}
    assert all(n == 2 for n in again.values()), again
    by_workflow: dict[str, int] = defaultdict(int)
    for key in again:
        by_workflow[key.split(":")[0]] += 1
    # at most the one step in flight per workflow, in one of node a's 2 pool processes
    assert all(n == 1 for n in by_workflow.values()), again
    assert len(again) <= 2, again

    takeovers = ClaimEvent.objects.filter(kind="takeover")
    taken = {e.workflow_id for e in takeovers}
    assert taken, "node b took nothing over"
    for event in takeovers:
        assert event.engine_id == second.engine_id
        assert event.previous_engine_id == first.engine_id
        assert event.previous_expires_at is not None
        if path == "session":
            # the dead node's session ended: taken before its claim expired
            assert event.at_ms < event.previous_expires_at, (event.at_ms, event.previous_expires_at)
        else:
            # only once the dead holder had expired, grace included
            assert event.at_ms > event.previous_expires_at + GRACE_MS
    assert taken <= set(held_by_first) | {h.workflow_id for h in handles}
    for handle in handles:
        assert_journal_fenced(handle.run_id, handle.workflow_id)
    print(
        f"\nnode a killed holding {len(held_by_first)} claims; "
        f"node b took over {len(taken)}; all 8 done {done_ms - kill_ms} ms after the kill; "
        f"steps run twice: {sorted(again)}"
    )


@pytest.mark.django_db(transaction=True)
def test_a_pool_child_killed_mid_turn_is_redriven_by_its_node(
    postgres, celery_app, workers, tmp_path
):
    worker = CeleryWorker("child-kill", tmp_path, REDIS_URL)
    workers.append(worker)
    worker.wait_ready()
    handle = client.start(
        "slow-chain", {"id": "ck", "steps": 5, "seconds": 0.6}, workflow_id="child-kill"
    )

    def mid_step() -> int | None:
        run = WorkflowRun.objects.get(pk=handle.run_id)
        recorded = JournalEntry.objects.filter(run_id=handle.run_id, kind="activity").count()
        started = sum(slow_counts("ck:").values())
        pid = run.turn_pid
        if run.status == "running" and recorded >= 1 and started == recorded + 1 and pid:
            return pid if pid != worker.proc.pid else None
        return None

    pid = wait_for("a turn in the middle of a step", mid_step, worker)
    in_flight = f"ck:{sum(slow_counts('ck:').values()) - 1}"
    os.kill(pid, signal.SIGKILL)  # one pool process dies; the node lives on
    killed_ms = wall_ms()

    assert handle.result(timeout=30) == [f"ck:{s}" for s in range(5)]
    assert worker.proc.poll() is None
    counts = slow_counts("ck:")
    assert counts[in_flight] in (1, 2), counts
    assert all(n == 1 for key, n in counts.items() if key != in_flight), counts
    # Same engine, same epoch: no takeover, no rotation; released at completion.
    events = list(
        ClaimEvent.objects.filter(workflow_id="child-kill")
        .order_by("id")
        .values_list("kind", "epoch", "engine_id")
    )
    assert events == [
        ("acquire", 1, worker.engine_id),
        ("release", 1, worker.engine_id),
    ], events
    assert f"its turn process {pid} is gone; re-driving it" in worker.log()
    finished = WorkflowRun.objects.get(pk=handle.run_id).finished_at
    assert finished is not None
    print(
        f"\npool process {pid} killed mid-step ({in_flight}); the node re-drove the run, "
        f"done {int(finished.timestamp() * 1000) - killed_ms} ms after the kill"
    )
