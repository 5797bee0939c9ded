"""Real-concurrency races of the claim protocol (SPEC §4.2, §4.4, §4.9, §8).

Each racer is an OS process (``tests.procs.claim_racer``) with its own
database connection, warmed before a start barrier: the parent writes
``GO`` to every racer only after all of them printed ``READY``. Sixteen
processes make this the ``processes`` tier; the races mean something on both
databases, so ``scripts/test`` runs this module on SQLite as well as in the
PostgreSQL leg.

Nothing here asserts a duration. The race is shown to be real from the
children's recorded wall-clock times (``time.time_ns()``, comparable across
processes): losers that read the claim as never-claimed before the winner's
commit finished can only have lost at the compare-and-set itself.

The acquire racers hold ``HOLD_AFTER_READ_MS`` between their read and their
batch (the racer's instrumented ``read``; product code is unchanged). Without
it the overlap was real but erratic: on two busy cores a CPU-bound SQLite
acquire often commits within one scheduler slice, before most racers have
woken (2 to 15 of 15 losers read epoch 0 across runs) — too close to the
bound for a test that must not flake. With it every racer goes to the batch
holding a stale read, which is the contention the CAS exists for.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import subprocess
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from django.db import connection

from tests.support import REPO_ROOT, child_env, python
from weft_django.conf import get_settings
from weft_django.models import ClaimEvent, WorkflowClaim
from weft_django.ownership import WORKFLOW_CLAIM_TAKEOVER_GRACE_MULTIPLIER

pytestmark = [pytest.mark.processes]

HANG_TIMEOUT_S = 60.0  # hang protection only, never a performance assertion
RACERS = 16
HOLD_AFTER_READ_MS = 50  # widens read -> CAS; never a duration assertion
_EOF = object()


class Racer:
    """One child process, its stdout lines on a queue and its stderr in a file."""

    def __init__(self, engine_id: str, argv: list[str], logs: Path) -> None:
        self.engine_id = engine_id
        self.stderr_path = logs / f"{engine_id}.stderr"
        with self.stderr_path.open("w") as stderr:
            self.proc = subprocess.Popen(
                [python(), "-m", "tests.procs.claim_racer", engine_id, *argv],
                cwd=REPO_ROOT,
                env=child_env(),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=stderr,
                text=True,
                start_new_session=True,  # its own process group, killed as a whole
            )
        self.lines: queue.Queue[object] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(_EOF)

    def next_line(self, deadline: float) -> str:
        try:
            line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            pytest.fail(f"{self.engine_id}: no output before the hang timeout")
        if line is _EOF:
            pytest.fail(f"{self.engine_id} exited early:\n{self.stderr_text()}")
        assert isinstance(line, str)
        return line

    def stderr_text(self) -> str:
        return self.stderr_path.read_text()

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        try:
            self.proc.wait(timeout=HANG_TIMEOUT_S)
        finally:
            for stream in (self.proc.stdin, self.proc.stdout):
                if stream is not None:
                    with contextlib.suppress(OSError):
                        stream.close()


def race(engine_ids: list[str], argv: list[str], logs: Path) -> list[dict[str, Any]]:
    """Start the racers, release them together, return each one's JSON report."""
    racers: list[Racer] = []
    try:
        for engine_id in engine_ids:
            racers.append(Racer(engine_id, argv, logs))
        deadline = time.monotonic() + HANG_TIMEOUT_S
        for racer in racers:
            assert racer.next_line(deadline) == "READY"
        fds = [racer.proc.stdin.fileno() for racer in racers if racer.proc.stdin]
        for fd in fds:  # the barrier: every racer is warm and waiting
            os.write(fd, b"GO\n")
        reports = []
        for racer in racers:
            reports.append(json.loads(racer.next_line(deadline)))
        for racer in racers:
            code = racer.proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            err = racer.stderr_text()
            assert code == 0, f"{racer.engine_id} exited {code}:\n{err}"
            assert "Traceback" not in err, f"{racer.engine_id}:\n{err}"
            assert "database is locked" not in err.lower(), f"{racer.engine_id}:\n{err}"
        return reports
    finally:
        for racer in racers:  # before teardown flushes the database
            racer.kill()


def assert_single_acquire(workflow_id: str, reports: list[dict[str, Any]]) -> dict[str, Any]:
    """One winner at epoch 1; every loser ``lost-race`` naming it; one event."""
    assert len(reports) == RACERS
    assert sorted(r["engine_id"] for r in reports) == [f"racer-{i:02d}" for i in range(RACERS)]
    winners = [r for r in reports if r["status"] == "acquired"]
    assert len(winners) == 1, Counter(r["status"] for r in reports)
    winner = winners[0]
    assert winner["epoch"] == 1
    assert winner["read_epoch"] == 0 and winner["read_holder_absent"]
    for loser in reports:
        if loser is winner:
            continue
        assert loser["status"] == "lost-race", loser
        assert loser["held_by"] == winner["engine_id"], loser
        assert loser["epoch"] is None

    row = WorkflowClaim.objects.get(pk=workflow_id)
    assert (row.epoch, row.engine_id) == (1, winner["engine_id"])
    events = list(ClaimEvent.objects.filter(workflow_id=workflow_id))
    assert [(e.kind, e.epoch, e.engine_id) for e in events] == [("acquire", 1, winner["engine_id"])]
    return winner


def cas_losers(reports: list[dict[str, Any]], winner: dict[str, Any]) -> list[dict[str, Any]]:
    """Losers whose read saw the claim never-claimed before the winner committed.

    ``read_began_ns`` is taken just before the query and the winner's
    ``finish_ns`` just after its batch committed (both ``time.time_ns()``);
    a read that began before that and saw epoch 0 with no holder went on to
    the CAS with a stale view — and lost there.
    """
    return [
        r
        for r in reports
        if r is not winner
        and r["read_epoch"] == 0
        and r["read_holder_absent"]
        and r["read_began_ns"] < winner["finish_ns"]
    ]


def run_acquire_race(workflow_id: str, logs: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    engine_ids = [f"racer-{i:02d}" for i in range(RACERS)]
    argv = ["acquire", workflow_id, "--hold-after-read-ms", str(HOLD_AFTER_READ_MS)]
    reports = race(engine_ids, argv, logs)
    winner = assert_single_acquire(workflow_id, reports)
    at_cas = cas_losers(reports, winner)
    print(
        f"\n[{connection.vendor}] {workflow_id}: winner {winner['engine_id']}; "
        f"{len(at_cas)} of {RACERS - 1} losers read epoch 0 before the winner committed"
    )
    # The race was real: some losers lost at the CAS, not by seeing the holder.
    assert len(at_cas) >= 2, [
        (r["engine_id"], r["read_epoch"], r["read_began_ns"], r["finish_ns"]) for r in reports
    ]
    return winner, reports


@pytest.mark.django_db(transaction=True)
def test_sixteen_processes_acquire_one_claim_exactly_one_wins(tmp_path):
    run_acquire_race("race-acquire", tmp_path)


@pytest.mark.django_db(transaction=True)
def test_four_processes_take_over_one_expired_claim_exactly_one_wins(tmp_path):
    workflow_id = "race-takeover"
    dead_epoch = 7
    dead_expires = 1_000  # engine-clock ms, far in the past of the racers' wall clock
    WorkflowClaim.objects.create(
        workflow_id=workflow_id,
        epoch=dead_epoch,
        engine_id="dead-engine",
        expires_at=dead_expires,
        claimed_at=500,
    )
    engine_ids = [f"taker-{i}" for i in range(4)]
    reports = race(engine_ids, ["takeover", workflow_id], tmp_path)

    assert sorted(r["engine_id"] for r in reports) == engine_ids
    winners = [r for r in reports if r["status"] == "acquired"]
    assert len(winners) == 1, Counter(r["status"] for r in reports)
    winner = winners[0]
    assert winner["epoch"] == dead_epoch + 1
    assert (winner["read_epoch"], winner["read_engine_id"]) == (dead_epoch, "dead-engine")
    for loser in reports:
        if loser is winner:
            continue
        assert loser["status"] in {"lost-race", "not-expired"}, loser
        assert loser["held_by"] == winner["engine_id"], loser
        assert loser["epoch"] is None
        if loser["status"] == "not-expired":  # read after the winner renewed the row
            assert loser["read_epoch"] == dead_epoch + 1
        else:  # read the dead holder, then lost the CAS
            assert (loser["read_epoch"], loser["read_engine_id"]) == (dead_epoch, "dead-engine")

    row = WorkflowClaim.objects.get(pk=workflow_id)
    assert (row.epoch, row.engine_id) == (dead_epoch + 1, winner["engine_id"])
    events = list(ClaimEvent.objects.filter(workflow_id=workflow_id))
    assert [(e.kind, e.epoch, e.engine_id, e.previous_engine_id) for e in events] == [
        ("takeover", dead_epoch + 1, winner["engine_id"], "dead-engine")
    ]
    # Safety from records alone (SPEC §8): taken only after expiry + grace.
    grace = WORKFLOW_CLAIM_TAKEOVER_GRACE_MULTIPLIER * get_settings().claim_renew_interval_ms
    assert events[0].previous_expires_at == dead_expires
    assert row.claimed_at is not None and row.claimed_at > dead_expires + grace
    print(
        f"\n[{connection.vendor}] takeover: winner {winner['engine_id']}; losers "
        f"{sorted(r['status'] for r in reports if r is not winner)}"
    )


@pytest.mark.django_db(transaction=True)
def test_sixteen_process_acquire_race_on_file_backed_sqlite_wal(tmp_path):
    if connection.vendor != "sqlite":
        pytest.skip("the SQLite leg of the race (this run's database is not SQLite)")
    name = str(connection.settings_dict["NAME"])
    assert name and "memory" not in name and os.path.isfile(name)  # file-backed
    assert connection.settings_dict["OPTIONS"].get("transaction_mode") == "IMMEDIATE"
    _, reports = run_acquire_race("race-acquire-sqlite", tmp_path)
    # No child fell over ("database is locked" or a traceback: checked in race()),
    # and every child really ran against the WAL file.
    assert {r["journal_mode"] for r in reports} == {"wal"}
