"""Crash detection by the database session (issue #15; ``ownership.presence``).

SPEC §4.4 (takeover), §8 (process tests). Real ``weft_worker`` processes on
PostgreSQL (``tests/engines/harness.py``):

- SIGKILL with the DEFAULT claim timings (TTL 30 s, renew 5 s): the other
  engine takes every claim over *before the dead holder's expires_at* -- the
  session path, not the TTL path -- and drives the runs to completion.
- SIGSTOP (short timings, TTL 3 s renew 1 s): the session lives, so the
  stalled engine is NOT taken over before expiry + grace, nor marked gone;
  after SIGCONT its late commit is refused by the fence.
- A zombie: an engine stalled (SIGSTOP) whose presence session is ended
  (``pg_terminate_backend``): its claims are taken over before expiry; after
  SIGCONT its late commit is refused, it takes its lock again and goes on.
  (A live engine whose session merely drops re-takes its lock within one
  watch look, so others rarely see it gone at all.)

Durations are never asserted; the paths are, from durable records
(``ClaimEvent.at_ms`` against ``previous_expires_at``). Waits are bounded by
hang-protection timeouts only.
"""

from __future__ import annotations

import signal

import pytest
from django.db import connection

from tests.engines.harness import (
    GRACE_MS,
    HANG_TIMEOUT_S,
    Worker,
    assert_journal_fenced,
    assert_written_while_current,
    events_of,
    journal,
    kill_all,
    wait_for,
)
from weft_django import client
from weft_django.kernel.clock import wall_ms
from weft_django.models import (
    ActivityAttempt,
    ClaimEvent,
    EngineRecord,
    JournalEntry,
    WorkflowClaim,
)
from weft_django.ownership.presence import NAMESPACE

pytestmark = [pytest.mark.processes]

#: The defaults (``conf.DEFAULTS``): the issue's case, over the harness's short timings.
DEFAULT_TIMINGS = {"WEFT_CLAIM_TTL": "30", "WEFT_CLAIM_RENEW_INTERVAL": "5"}
DEFAULT_TTL_MS = 30_000
PARKED = 12
RESULT_TIMEOUT_S = 60.0


def _takeovers_by(engine_id: str, of: str) -> list[ClaimEvent]:
    return list(
        ClaimEvent.objects.filter(kind="takeover", engine_id=engine_id, previous_engine_id=of)
    )


def _park(prefix: str, n: int) -> dict[str, str]:
    handles = {}
    for i in range(n):
        wid = f"{prefix}-{i}"
        handles[wid] = client.start("signal-wait", {"id": wid}, workflow_id=wid).run_id
    return handles


def _presence_pid(engine_id: str) -> int | None:
    key = EngineRecord.objects.get(pk=engine_id).presence_key
    with connection.cursor() as cur:
        cur.execute(
            "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted "
            "AND classid::int8 = %s AND objid::int8 = %s AND objsubid = 2",
            [NAMESPACE, key],
        )
        row = cur.fetchone()
    return int(row[0]) if row else None


@pytest.mark.django_db(transaction=True)
def test_sigkill_with_default_timings_is_taken_over_before_expiry(tmp_path):
    assert connection.vendor == "postgresql"
    workers: list[Worker] = []
    try:
        a = Worker("fast-a", tmp_path, env=DEFAULT_TIMINGS)
        workers.append(a)
        a.wait_booted()
        handles = _park("fast", PARKED)
        wait_for(
            "every run parked and held by A",
            lambda: (
                WorkflowClaim.objects.filter(engine_id="fast-a").count() == PARKED
                and ClaimEvent.objects.filter(kind="acquire", engine_id="fast-a").count() == PARKED
            ),
            a,
        )
        b = Worker("fast-b", tmp_path, env=DEFAULT_TIMINGS)
        workers.append(b)
        assert b.wait_booted().presence_key is not None
        rows = WorkflowClaim.objects.filter(engine_id="fast-a")
        held = dict(rows.values_list("workflow_id", "expires_at"))
        kill_ms = wall_ms()
        a.kill()
        assert a.proc.returncode == -signal.SIGKILL
        taken = wait_for(
            "B to take over every claim of A",
            lambda: (lambda t: t if len(t) == PARKED else None)(_takeovers_by("fast-b", "fast-a")),
            b,
            timeout=HANG_TIMEOUT_S,
        )
        for event in taken:
            # The session path: before the dead holder expired, let alone + grace.
            assert event.previous_expires_at == held[event.workflow_id], event
            assert event.at_ms < event.previous_expires_at, (event.at_ms, event.previous_expires_at)
            assert event.epoch == 2
        dead = EngineRecord.objects.get(pk="fast-a")
        assert dead.stopped_at is not None  # marked by B, not by itself
        assert dead.stopped_at < min(e.previous_expires_at for e in taken)
        for wid in handles:
            client.signal(wid, "go", wid)
        for wid, run_id in handles.items():
            assert client.get_handle(wid).result(timeout=RESULT_TIMEOUT_S) == wid
            entries = journal(run_id)
            assert_journal_fenced(entries, events_of(wid))
            assert {e.engine_id for e in entries if e.kind == "signal"} <= {"fast-b"}
        latest = max(e.at_ms for e in taken) - kill_ms
        print(
            f"\n[fast takeover] {PARKED} claims taken over; last {latest} ms after the kill "
            f"(TTL path bound {DEFAULT_TTL_MS + 2 * 5_000} ms)"
        )
    finally:
        kill_all(workers)


@pytest.mark.django_db(transaction=True)
def test_sigstop_keeps_the_ttl_path_and_the_late_commit_is_refused(tmp_path):
    assert connection.vendor == "postgresql"
    workers: list[Worker] = []
    try:
        a = Worker("stall-a", tmp_path)  # harness timings: TTL 3 s, renew 1 s
        workers.append(a)
        a.wait_booted()
        handle = client.start(
            "slow-chain", {"id": "stall", "steps": 10, "seconds": 0.6}, workflow_id="stall"
        )
        wait_for("two journal entries", lambda: len(journal(handle.run_id)) >= 2, a)
        b = Worker("stall-b", tmp_path)
        workers.append(b)
        b.wait_booted()
        a.signal_group(signal.SIGSTOP)
        stop_ms = wall_ms()
        # Stopped mid-chain: A still holds the claim (it cannot release it now).
        assert WorkflowClaim.objects.get(pk="stall").engine_id == "stall-a"
        takeover = wait_for(
            "B to take the stalled claim over",
            lambda: next(iter(_takeovers_by("stall-b", "stall-a")), None),
            b,
        )
        # The session lived: the TTL path, grace included; A never read as gone.
        assert takeover.previous_expires_at is not None
        assert takeover.at_ms > takeover.previous_expires_at + GRACE_MS, takeover
        assert EngineRecord.objects.get(pk="stall-a").stopped_at is None
        cont_ms = wall_ms()
        a.signal_group(signal.SIGCONT)
        result = handle.result(timeout=RESULT_TIMEOUT_S)
        assert result == [f"stall:{i}" for i in range(10)]
        # A's in-flight step finished after SIGCONT; its commit at the old epoch
        # was refused: nothing it wrote after the takeover carries epoch 1.
        record = wait_for(
            "A's heartbeat counting the deposition",
            lambda: EngineRecord.objects.filter(
                pk="stall-a", heartbeat_at__gt=cont_ms, metrics__attempts__deposed__gte=1
            ).first(),
            a,
        )
        assert record.metrics["renewal_failures"] >= 1, record.metrics
        events = events_of("stall")
        entries = journal(handle.run_id)
        assert_journal_fenced(entries, events)
        assert_written_while_current(entries, events)
        late = JournalEntry.objects.filter(run_id=handle.run_id, engine_id="stall-a")
        assert not late.filter(at_ms__gt=takeover.at_ms).exists()
        # The attempt history is fenced with the outcomes: each step ended ok once,
        # and nothing recorded after the takeover carries A's old epoch.
        tried = list(ActivityAttempt.objects.filter(run_id=handle.run_id))
        assert sorted(a.position for a in tried if a.outcome == "ok") == sorted(
            {a.position for a in tried}
        ), [(a.position, a.attempt, a.outcome, a.engine_id) for a in tried]
        assert len([a for a in tried if a.outcome == "ok"]) == 10
        late_rows = [a for a in tried if a.ended_at > takeover.at_ms]
        assert all(a.epoch >= takeover.epoch for a in late_rows), late_rows
        print(f"\n[stall] taken over {takeover.at_ms - stop_ms} ms after SIGSTOP (TTL path)")
    finally:
        kill_all(workers)


@pytest.mark.django_db(transaction=True)
def test_a_zombie_whose_session_ended_is_taken_over_fenced_and_goes_on(tmp_path):
    """A stalls (SIGSTOP) and its presence session is ended meanwhile (as a
    server-side timeout would): B takes its claims over before they expire;
    after SIGCONT, A's in-flight commit is refused, its renewal learns the
    losses, it takes its lock again and finishes new work."""
    assert connection.vendor == "postgresql"
    workers: list[Worker] = []
    try:
        a = Worker("zombie-a", tmp_path, env=DEFAULT_TIMINGS)
        workers.append(a)
        a.wait_booted()
        handles = _park("zombie", 3)
        chain = client.start(
            "slow-chain", {"id": "zc", "steps": 10, "seconds": 0.6}, workflow_id="zombie-chain"
        )
        wait_for(
            "A to hold every claim, the chain under way",
            lambda: (
                WorkflowClaim.objects.filter(engine_id="zombie-a").count() == 4
                and len(journal(chain.run_id)) >= 1
            ),
            a,
        )
        b = Worker("zombie-b", tmp_path, env=DEFAULT_TIMINGS)
        workers.append(b)
        b.wait_booted()
        wait_for(
            "A still holding the chain mid-step",
            lambda: WorkflowClaim.objects.filter(engine_id="zombie-a").count() == 4,
            a,
        )
        pid = _presence_pid("zombie-a")
        assert pid is not None
        a.signal_group(signal.SIGSTOP)
        with connection.cursor() as cur:
            cur.execute("SELECT pg_terminate_backend(%s)", [pid])
        taken = wait_for(
            "B to take over A's claims",
            lambda: (lambda t: t if len(t) == 4 else None)(_takeovers_by("zombie-b", "zombie-a")),
            a,
            b,
        )
        assert all(e.at_ms < e.previous_expires_at for e in taken), taken
        assert EngineRecord.objects.get(pk="zombie-a").stopped_at is not None
        cont_ms = wall_ms()
        a.signal_group(signal.SIGCONT)
        # A is alive: it takes its lock again and its record is live again.
        wait_for(
            "A's presence back",
            lambda: (
                EngineRecord.objects.filter(pk="zombie-a", stopped_at=None).exists()
                and (_presence_pid("zombie-a") not in (None, pid))
            ),
            a,
        )
        for wid in handles:
            client.signal(wid, "go", wid)
        handles["zombie-chain"] = chain.run_id
        for wid, run_id in handles.items():
            client.get_handle(wid).result(timeout=RESULT_TIMEOUT_S)
            entries = journal(run_id)
            assert_journal_fenced(entries, events_of(wid))
            assert_written_while_current(entries, events_of(wid))
            # Nothing A wrote after the takeover (its late commit was refused).
            takeover_ms = next(e.at_ms for e in taken if e.workflow_id == wid)
            assert not [e for e in entries if e.engine_id == "zombie-a" and e.at_ms > takeover_ms]
        assert client.get_handle("zombie-chain").result() == [f"zc:{i}" for i in range(10)]
        record = wait_for(
            "A's heartbeat counting the depositions",
            lambda: EngineRecord.objects.filter(
                pk="zombie-a", heartbeat_at__gt=cont_ms, metrics__attempts__deposed__gte=1
            ).first(),
            a,
        )
        assert record.metrics["renewal_failures"] >= 1, record.metrics
        # A goes on: B leaves, and A picks up and finishes new work.
        b.signal_group(signal.SIGTERM)
        assert b.proc.wait(timeout=HANG_TIMEOUT_S) == 0, b.log()
        more = _park("after", 2)
        for wid in more:
            client.signal(wid, "go", wid)
        for wid in more:
            assert client.get_handle(wid).result(timeout=RESULT_TIMEOUT_S) == wid
            assert {e.engine_id for e in events_of(wid)} == {"zombie-a"}
    finally:
        kill_all(workers)
