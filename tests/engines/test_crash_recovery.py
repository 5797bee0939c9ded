"""Crash recovery and graceful hand-over with real ``weft_worker`` processes.

SPEC §2 "Engines", §4.4 (expire, takeover, release), §8 (process tests).

Each worker is ``python manage.py weft_worker`` in its own process group
(``start_new_session=True``) on the *test* database (``child_env()``), with
the short claim timings of ``WEFT_TEST_TIMINGS=1`` (TTL 3 s, renew 1 s);
see ``tests/engines/harness.py``. Children are killed as a whole group in a
``finally`` before the database is flushed.

Safety is asserted from durable records only (``ClaimEvent``,
``WorkflowClaim``, ``JournalEntry``, ``SideEffect``, ``EngineRecord``); no
assertion compares wall-clock durations. Latencies are printed (``-s``).
Every wait is a poll of the database bounded by ``HANG_TIMEOUT_S``, which is
hang protection only.

PostgreSQL only: the module carries the ``processes`` marker, which the
SQLite leg of CI deselects (``-m "not processes"``).
"""

from __future__ import annotations

import signal
from collections import Counter
from typing import Any

import pytest
from django.db import connection

from tests.engines.harness import (
    CHILD_TTL_MS,
    GRACE_MS,
    HANG_TIMEOUT_S,
    Worker,
    assert_journal_fenced,
    events_of,
    journal,
    side_effect_counts,
    wait_for,
)
from weft_django import client
from weft_django.kernel.clock import wall_ms
from weft_django.models import EngineRecord, JournalEntry, WorkflowClaim, WorkflowRun

pytestmark = [pytest.mark.processes]

RESULT_TIMEOUT_S = 60.0
STEPS = 6
STEP_SECONDS = 0.4
TTL_PATH = {"WEFT_SESSION_PRESENCE": "0"}  # crash detection by the claim TTL alone


def chain_input(key: str) -> dict[str, Any]:
    return {"id": key, "steps": STEPS, "seconds": STEP_SECONDS}


@pytest.mark.django_db(transaction=True)
def test_sigkilled_worker_is_taken_over_and_recorded_steps_do_not_rerun(tmp_path):
    assert connection.vendor == "postgresql"
    workflow_id = "crash-chain"
    key = "crash"
    workers: list[Worker] = []
    try:
        # The TTL path (tests/engines/test_fast_takeover.py: the session presence path).
        first = Worker("crash-w1", tmp_path, env=TTL_PATH)
        workers.append(first)
        first.wait_booted()
        handle = client.start("slow-chain", chain_input(key), workflow_id=workflow_id)

        def two_entries() -> list[JournalEntry] | None:
            entries = journal(handle.run_id)
            return entries if len(entries) >= 2 else None

        seen = wait_for("two journal entries", two_entries, first)
        kill_ms = wall_ms()
        first.kill()  # SIGKILL to the whole process group, then reaped
        assert first.proc.returncode == -signal.SIGKILL
        seen_positions = {e.position for e in seen}

        second = Worker("crash-w2", tmp_path, env=TTL_PATH)
        workers.append(second)
        result = handle.result(timeout=RESULT_TIMEOUT_S)

        # Complete and in order.
        assert result == [f"{key}:{i}" for i in range(STEPS)]
        run = WorkflowRun.objects.get(pk=handle.run_id)
        assert run.status == "completed"

        # The claim history: acquire by the dead engine, takeover, release.
        events = events_of(workflow_id)
        assert [(e.kind, e.epoch, e.engine_id) for e in events] == [
            ("acquire", 1, "crash-w1"),
            ("takeover", 2, "crash-w2"),
            ("release", 2, "crash-w2"),
        ], events
        acquire, takeover, release = events
        assert takeover.previous_engine_id == "crash-w1"
        assert takeover.previous_expires_at is not None
        # Taken over only once the dead holder had expired, grace included.
        assert takeover.at_ms > takeover.previous_expires_at + GRACE_MS
        assert takeover.previous_expires_at >= acquire.at_ms + CHILD_TTL_MS
        assert release.reason == "completed"
        claim = WorkflowClaim.objects.get(pk=workflow_id)
        assert (claim.epoch, claim.engine_id, claim.expires_at, claim.claimed_at) == (
            2,
            None,
            None,
            None,
        )
        dead = EngineRecord.objects.get(pk="crash-w1")
        assert dead.stopped_at is None  # it never got to say goodbye

        # The journal: fenced by the epoch each entry was written under.
        entries = journal(handle.run_id)
        assert_journal_fenced(entries, events)
        activity_entries = [e for e in entries if e.kind == "activity"]
        assert [e.result for e in activity_entries] == result
        by_dead = [e for e in activity_entries if e.epoch == 1]
        by_new = [e for e in activity_entries if e.epoch == 2]
        assert by_dead and by_new, [(e.position, e.epoch) for e in entries]
        # Every entry seen before the kill was written by the dead engine.
        assert seen_positions <= {e.position for e in by_dead}

        # Recorded activities never ran again; only the step in flight at the
        # kill (the first one the new engine recorded) may have run twice.
        counts = side_effect_counts(key)
        assert set(counts) == set(result), counts
        for entry in by_dead:
            assert counts[entry.result] == 1, (entry.result, counts)
        twice = [k for k, n in counts.items() if n > 1]
        assert len(twice) <= 1, counts
        assert all(counts[k] == 2 for k in twice), counts
        if twice:
            assert twice == [by_new[0].result], (twice, by_new[0].result)

        latency = takeover.at_ms - kill_ms
        after_threshold = takeover.at_ms - takeover.previous_expires_at - GRACE_MS
        print(
            f"\n[crash] killed after {len(seen)} journal entries; dead holder expires_at "
            f"{takeover.previous_expires_at - kill_ms:+d} ms after the kill; takeover "
            f"{latency} ms after the kill ({after_threshold} ms after expiry + grace); "
            f"steps by dead/new engine {len(by_dead)}/{len(by_new)}; "
            f"ran twice: {twice or 'none'}"
        )
    finally:
        for worker in workers:
            worker.kill()


@pytest.mark.django_db(transaction=True)
def test_sigterm_releases_claims_and_the_next_worker_acquires_without_waiting(tmp_path):
    """A rolling restart: two workers are up; the one that picked the run up
    ("worker 1") gets SIGTERM mid-chain while the other ("worker 2") idles (the
    claim is live). Worker 1 stops at the step boundary after its in-flight
    step, releases the claim, marks itself stopped and exits 0; worker 2
    acquires the released claim at once (an ``acquire``, not a ``takeover``
    after expiry)."""
    assert connection.vendor == "postgresql"
    workflow_id = "graceful-chain"
    key = "graceful"
    grace_s = 5.0  # far longer than one step: the in-flight step finishes in it
    workers: list[Worker] = []
    try:
        for name in ("graceful-a", "graceful-b"):
            workers.append(Worker(name, tmp_path, "--grace", str(grace_s)))
        for worker in workers:  # both booted before the run exists
            worker.wait_booted()
        handle = client.start("slow-chain", chain_input(key), workflow_id=workflow_id)
        wait_for(
            "a journal entry",
            lambda: JournalEntry.objects.filter(run_id=handle.run_id).exists(),
            *workers,
        )
        holder = WorkflowClaim.objects.get(pk=workflow_id).engine_id
        first, second = sorted(workers, key=lambda w: w.engine_id != holder)
        assert first.engine_id == holder

        term_ms = wall_ms()
        first.signal_group(signal.SIGTERM)
        code = first.proc.wait(timeout=HANG_TIMEOUT_S)
        exit_ms = wall_ms()
        assert code == 0, first.log()
        assert "Traceback" not in first.log(), first.log()
        # Worker 1 said goodbye: engine marked stopped.
        stopped = EngineRecord.objects.get(pk=first.engine_id)
        assert stopped.stopped_at is not None

        result = handle.result(timeout=RESULT_TIMEOUT_S)
        assert result == [f"{key}:{i}" for i in range(STEPS)]

        events = events_of(workflow_id)
        assert [(e.kind, e.epoch, e.engine_id) for e in events] == [
            ("acquire", 1, first.engine_id),
            ("release", 1, first.engine_id),
            ("acquire", 2, second.engine_id),  # acquired, not taken over
            ("release", 2, second.engine_id),
        ], events
        _, release1, acquire2, _ = events
        old_expires_at = release1.previous_expires_at
        assert old_expires_at is not None
        assert release1.at_ms <= stopped.stopped_at
        # The hand-over did not wait for expiry: the new holder's claimed_at is
        # earlier than the old holder's expiry would have allowed a takeover —
        # indeed earlier than that expiry itself (SPEC §8).
        claimed_at = acquire2.at_ms
        assert release1.at_ms <= claimed_at
        assert claimed_at < old_expires_at + GRACE_MS
        assert claimed_at < old_expires_at
        assert acquire2.previous_engine_id == ""  # the holder was absent
        claim = WorkflowClaim.objects.get(pk=workflow_id)
        assert (claim.epoch, claim.engine_id) == (2, None)

        entries = journal(handle.run_id)
        assert_journal_fenced(entries, events)
        activity_entries = [e for e in entries if e.kind == "activity"]
        assert [e.result for e in activity_entries] == result
        by_first = [e for e in activity_entries if e.epoch == 1]
        assert 1 <= len(by_first) < STEPS, [(e.position, e.epoch) for e in entries]
        # The step in flight at SIGTERM finished and was recorded inside the
        # grace period, and nothing started after it: every step ran once.
        counts = side_effect_counts(key)
        assert counts == Counter({k: 1 for k in result}), counts

        print(
            f"\n[graceful] exit {exit_ms - term_ms} ms after SIGTERM (grace {grace_s} s); "
            f"release {release1.at_ms - term_ms} ms after SIGTERM; next claimed_at "
            f"{claimed_at - release1.at_ms} ms after the release, "
            f"{old_expires_at - claimed_at} ms before the old expires_at; steps by "
            f"worker 1/2: {len(by_first)}/{STEPS - len(by_first)}"
        )
    finally:
        for worker in workers:
            worker.kill()
