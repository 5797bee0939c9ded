"""Many engines, one database: real ``weft_worker`` processes on PostgreSQL.

SPEC §2 "Engines", §4 (ownership), §8 (process tests). Every worker is a
``manage.py weft_worker`` child in its own process group, on the test
database, with the claim timings of ``WEFT_TEST_TIMINGS=1`` (TTL 3 s, renew
1 s); see ``tests/engines/harness.py``. Every test kills all its groups in a
``finally``.

No assertion compares wall-clock durations. Safety is read from durable
records: each journal entry carries the ``(engine_id, epoch)`` it was written
under and each claim transition is a ``ClaimEvent`` with ``at_ms`` and the
holder it replaced (``previous_engine_id``, ``previous_expires_at``); real
activity runs are counted in ``SideEffect``. Latencies are printed (``-s``).
Waits poll the database and are bounded by generous timeouts that are hang
protection only (two busy cores, other suites running beside this one).

The "mixed" workflow (``project/demo/workflows.py``) parks in every way: an
activity, a short sleep, an async activity whose token the hand-out activity
writes to ``AsyncToken``, a signal wait, a child, an activity. The test plays
the outside world (``MixedDriver``): it completes the tokens it finds with
``client.complete_async_activity`` and sends the signal — to half of the runs
right at start (buffered before the wait), to the others once their token is
completed (usually while they are parked on the wait).
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections import Counter, defaultdict
from typing import Any

import pytest
from django.db import connection

from project.demo.models import AsyncToken, SideEffect
from tests.engines.harness import (
    CHILD_RENEW_INTERVAL_MS,
    GRACE_MS,
    Worker,
    assert_journal_fenced,
    assert_reruns_within,
    assert_written_while_current,
    events_by_workflow,
    journals_by_run,
    kill_all,
    process_cpu_seconds,
    summary,
    wait_for,
    wall_ms,
)
from weft_django import client
from weft_django.errors import AsyncActivityTokenError
from weft_django.models import (
    LIVE_STATUSES,
    ClaimEvent,
    EngineRecord,
    GlobalLease,
    JournalEntry,
    OwnershipModeMarker,
    WorkflowClaim,
    WorkflowRun,
)

pytestmark = [pytest.mark.processes]

BOOT_TIMEOUT_S = 60.0  # hang protection only
LOAD_TIMEOUT_S = 180.0  # hang protection only
MANY_TIMEOUT_S = 600.0  # hang protection only: 200 workflows on two shared cores
MANY_WORKFLOWS = 200
MIXED_SLEEP_S = 0.2
CHAIN_STEP_S = 0.3
DEPOSED_MARKERS = ("lost its ownership claim", "was deposed from", "discarded a stale")


# -- the outside world of the "mixed" workflow ----------------------------------------


def mixed_result(key: str) -> dict[str, Any]:
    return {
        "a": f"{key}:a",
        "paid": {"paid": key},
        "approved": key,
        "child": f"{key}:child",
        "b": f"{key}:b",
    }


class MixedDriver:
    """Completes handed-out tokens and sends the signal each "mixed" run waits for."""

    def __init__(self) -> None:
        self.keys: dict[str, str] = {}
        self.completed: set[str] = set()
        self.signalled: set[str] = set()

    def start(self, workflow_id: str, key: str, *, signal_now: bool) -> None:
        self.keys[workflow_id] = key
        client.start("mixed", {"id": key, "sleep": MIXED_SLEEP_S}, workflow_id=workflow_id)
        if signal_now:
            self.signal(workflow_id)

    def signal(self, workflow_id: str) -> None:
        if workflow_id not in self.signalled:
            client.signal(workflow_id, "go", self.keys[workflow_id])
            self.signalled.add(workflow_id)

    def pump(self) -> int:
        """One pass: complete every new token, then signal its run."""
        done = 0
        for row in AsyncToken.objects.exclude(token__in=self.completed):
            # Single use: a token completed once is "used" (never expected here:
            # a hand-out that runs again hands out the same token, one row).
            with contextlib.suppress(AsyncActivityTokenError):
                client.complete_async_activity(row.token, {"paid": row.key})
            self.completed.add(row.token)
            self.signal(row.workflow_id)
            done += 1
        return done


def start_chains(prefix: str, count: int, steps: int) -> dict[str, str]:
    """``slow-chain`` runs; returns workflow id -> SideEffect key prefix."""
    chains = {}
    for i in range(count):
        key = f"{prefix}{i}"
        client.start(
            "slow-chain",
            {"id": key, "steps": steps, "seconds": CHAIN_STEP_S},
            workflow_id=f"{prefix}-chain-{i}",
        )
        chains[f"{prefix}-chain-{i}"] = key
    return chains


def live_runs() -> int:
    return WorkflowRun.objects.filter(status__in=LIVE_STATUSES).count()


def wait_all_done(
    driver: MixedDriver | None,
    workers: list[Worker],
    what: str,
    timeout: float = LOAD_TIMEOUT_S,
) -> None:
    def probe() -> bool:
        if driver is not None:
            driver.pump()
        return live_runs() == 0

    wait_for(what, probe, *workers, timeout=timeout, interval=0.2)


def claims_by_engine() -> Counter[str]:
    held = WorkflowClaim.objects.filter(engine_id__isnull=False).values_list("engine_id", flat=True)
    return Counter(held)


def held_by(engine_id: str) -> dict[str, tuple[int, int]]:
    """workflow id -> (epoch, expires_at) of every claim ``engine_id`` holds."""
    rows = WorkflowClaim.objects.filter(engine_id=engine_id).values_list(
        "workflow_id", "epoch", "expires_at"
    )
    return {wid: (epoch, expires_at) for wid, epoch, expires_at in rows}


def chains_underway(chains: dict[str, str], entries: int = 2) -> int:
    runs = WorkflowRun.objects.filter(workflow_id__in=list(chains))
    return sum(1 for run in runs if JournalEntry.objects.filter(run=run).count() >= entries)


def busiest(workers: list[Worker]) -> Worker:
    counts = claims_by_engine()
    return max(workers, key=lambda w: counts.get(w.engine_id, 0))


def side_effects_by_workflow(
    chains: dict[str, str], driver: MixedDriver | None
) -> dict[str, Counter[str]]:
    """workflow id -> how often each of its steps really ran (``SideEffect``).

    Keys are ``<key>:<step>``; a "mixed" run's ``<key>:child`` step belongs
    to its child workflow."""
    chain_of = {key: wid for wid, key in chains.items()}
    mixed_of = {key: wid for wid, key in (driver.keys.items() if driver else ())}
    children = dict(
        WorkflowRun.objects.filter(name="mixed-child").values_list("input__id", "workflow_id")
    )
    counts: dict[str, Counter[str]] = defaultdict(Counter)
    for kind, k in SideEffect.objects.values_list("kind", "key"):
        key, _, step = k.partition(":")
        if kind == "slow" and key in chain_of:
            counts[chain_of[key]][k] += 1
        elif kind == "mixed" and key in mixed_of:
            counts[children[key] if step == "child" else mixed_of[key]][k] += 1
    return counts


def check_side_effects(
    chains: dict[str, str], driver: MixedDriver | None, events: dict[str, list[ClaimEvent]]
) -> dict[str, list[str]]:
    """Each workflow's steps ran once, but for at most one step per takeover of
    it. Returns workflow id -> the steps that ran twice."""
    reruns = {}
    for wid, counts in side_effects_by_workflow(chains, driver).items():
        takeovers = sum(1 for e in events.get(wid, []) if e.kind == "takeover")
        twice = assert_reruns_within(counts, takeovers, wid)
        if twice:
            reruns[wid] = twice
    return reruns


def check_runs_completed(chains: dict[str, str], driver: MixedDriver | None, steps: int) -> None:
    runs = list(WorkflowRun.objects.all())
    not_done = [(r.workflow_id, r.status, r.error) for r in runs if r.status != "completed"]
    assert not not_done, not_done[:10]
    by_wid = {r.workflow_id: r for r in runs}
    for wid, key in chains.items():
        assert by_wid[wid].result == [f"{key}:{i}" for i in range(steps)], wid
    if driver is not None:
        for wid, key in driver.keys.items():
            assert by_wid[wid].result == mixed_result(key), wid
        children = [r for r in runs if r.name == "mixed-child"]
        assert len(children) == len(driver.keys)
        for child in children:
            assert child.result == f"{child.input['id']}:child"


def check_every_journal() -> tuple[dict[str, list[ClaimEvent]], int]:
    """Every run: entries fenced by the granting event, epochs non-decreasing,
    written while their epoch was current. Returns the events and entry count."""
    runs = list(WorkflowRun.objects.values_list("pk", "workflow_id"))
    journals = journals_by_run(pk for pk, _ in runs)
    events = events_by_workflow()
    total = 0
    for pk, wid in runs:
        entries = journals.get(str(pk), [])
        assert entries, wid
        assert_journal_fenced(entries, events[wid])
        assert_written_while_current(entries, events[wid])
        total += len(entries)
    return events, total


def backends(engine_id: str) -> list[tuple[int, str, Any]]:
    """``(pid, state, xact_start)`` of each backend of ``engine_id`` (``pg_stat_activity``)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pid, state, xact_start FROM pg_stat_activity WHERE application_name = %s",
            [engine_id],
        )
        return [(int(pid), str(state), xact_start) for pid, state, xact_start in cursor]


def open_transactions(engine_id: str) -> set[tuple[int, Any]]:
    """``(pid, xact_start)``: one transaction of ``engine_id``, identified."""
    return {(pid, xact) for pid, _, xact in backends(engine_id) if xact is not None}


def transactions_once_settled(worker: Worker) -> set[tuple[int, Any]]:
    """The worker's open transactions once none of its backends still runs a
    statement (one sent before a SIGSTOP finishes on its own)."""

    def settled() -> list[list[tuple[int, str, Any]]]:
        rows = backends(worker.engine_id)
        return [rows] if all(state != "active" for _, state, _ in rows) else []

    (rows,) = wait_for(f"{worker.engine_id}'s statements to finish", settled, worker)
    return {(pid, xact) for pid, _, xact in rows if xact is not None}


def listening(engine_id: str) -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity "
            "WHERE application_name = %s AND query ILIKE 'LISTEN%%'",
            [engine_id],
        )
        return int(cursor.fetchone()[0])


def stop_outside_transaction(worker: Worker) -> None:
    """SIGSTOP ``worker`` at a moment when it holds no open transaction.

    A process stopped inside a batch keeps its row locks, and every other
    engine's takeover of that claim would wait on the lock until SIGCONT --
    true of PostgreSQL, not of weft. So, observed rather than timed: after the
    stop, wait until none of the worker's backends still runs a statement (one
    sent before the stop finishes on its own); a transaction still open then
    is one the stop landed in: SIGCONT, wait until that very transaction
    (``pid``, ``xact_start``) has ended, and stop again.
    """
    for _ in range(200):  # hang protection only: each round waits on the database
        worker.signal_group(signal.SIGSTOP)
        caught = transactions_once_settled(worker)
        if not caught:
            return
        worker.signal_group(signal.SIGCONT)
        wait_for(
            f"{worker.engine_id} to end the transaction it was stopped in",
            lambda stopped_in=caught: not stopped_in & open_transactions(worker.engine_id),
            worker,
        )
    pytest.fail(f"could not stop {worker.engine_id} outside a transaction")


def observation(line: str) -> str:
    """Which of the three deposition signals a worker log line reports."""
    if "discarded a stale" in line:
        return "wake discarded"
    if "during=renewal" in line:
        return "renewal lost"
    if "during=fenced-write" in line or "was deposed from" in line:
        return "fenced write refused"
    return "claim lost"


# -- 1. many engines, many workflows -------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_three_engines_complete_two_hundred_mixed_workflows_fenced(tmp_path):
    assert connection.vendor == "postgresql"
    workers: list[Worker] = []
    try:
        workers = [Worker(f"many-{i}", tmp_path) for i in range(3)]
        for worker in workers:
            worker.wait_booted(timeout=BOOT_TIMEOUT_S)
        began = time.monotonic()
        driver = MixedDriver()
        for i in range(MANY_WORKFLOWS):
            driver.start(f"many-{i:03d}", f"m{i:03d}", signal_now=i % 2 == 0)
        started = time.monotonic()
        wait_all_done(
            driver, workers, f"{MANY_WORKFLOWS} mixed workflows to finish", MANY_TIMEOUT_S
        )
        finished = time.monotonic()
        worker_cpu = sum(w.cpu_seconds() or 0.0 for w in workers)
        test_cpu = process_cpu_seconds(os.getpid()) or 0.0

        check_runs_completed({}, driver, 0)
        assert WorkflowRun.objects.count() == 2 * MANY_WORKFLOWS  # parents and children
        events, entries = check_every_journal()
        # Every claim was released by its run's completion.
        assert not WorkflowClaim.objects.filter(engine_id__isnull=False).exists()
        for wid, evs in events.items():
            assert evs[-1].kind == "release" and evs[-1].reason == "completed", (wid, evs[-1])

        takeovers = ClaimEvent.objects.filter(kind="takeover").count()
        # Steps ran once (a starved renewal would let another engine take over,
        # and only then may the step in flight run again).
        check_side_effects({}, driver, events)

        acquired = Counter(
            ClaimEvent.objects.filter(kind="acquire").values_list("engine_id", flat=True)
        )
        written = Counter(JournalEntry.objects.values_list("engine_id", flat=True))
        latencies = [
            int((r.finished_at - r.created_at).total_seconds() * 1000)
            for r in WorkflowRun.objects.filter(name="mixed")
        ]
        print(
            f"\n[many] {MANY_WORKFLOWS} mixed workflows (+{MANY_WORKFLOWS} children) on 3 engines: "
            f"started in {started - began:.1f} s, all done {finished - began:.1f} s after the "
            f"first start; {entries} journal entries; acquisitions per engine "
            f"{dict(sorted(acquired.items()))}; journal entries per engine "
            f"{dict(sorted(written.items()))}; takeovers {takeovers}; "
            f"start-to-finish per workflow {summary(latencies)}; CPU used: workers "
            f"{worker_cpu:.1f} s, test process {test_cpu:.1f} s"
        )
    finally:
        kill_all(workers)


# -- 2. SIGKILL ------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_sigkilled_engine_workflows_taken_over_after_expiry_and_complete(tmp_path):
    assert connection.vendor == "postgresql"
    steps = 8
    workers: list[Worker] = []
    try:
        # The TTL path (tests/engines/test_fast_takeover.py: the session presence path).
        env = {"WEFT_SESSION_PRESENCE": "0"}
        workers = [Worker(f"kill-{i}", tmp_path, env=env) for i in range(3)]
        for worker in workers:
            worker.wait_booted(timeout=BOOT_TIMEOUT_S)
        chains = start_chains("kill", 9, steps)
        driver = MixedDriver()
        for i in range(9):  # parked on their async activity until after the kill
            driver.start(f"kill-mix-{i}", f"k{i}", signal_now=False)
        wait_for(
            "chains under way and every token handed out",
            lambda: AsyncToken.objects.count() >= 9 and chains_underway(chains) >= 2,
            *workers,
            timeout=LOAD_TIMEOUT_S,
        )
        victim = busiest(workers)
        survivors = [w for w in workers if w is not victim]
        kill_ms = wall_ms()
        victim.kill()
        assert victim.proc.returncode == -signal.SIGKILL
        held = held_by(victim.engine_id)
        assert held, "the killed engine held no claim"

        wait_all_done(driver, survivors, "the survivors to finish everything")

        check_runs_completed(chains, driver, steps)
        events, _ = check_every_journal()
        latencies, margins = [], []
        for wid, (epoch, expires_at) in held.items():
            takeovers = [
                e
                for e in events[wid]
                if e.kind == "takeover" and e.previous_engine_id == victim.engine_id
            ]
            assert len(takeovers) == 1, (wid, events[wid])
            takeover = takeovers[0]
            assert takeover.engine_id in {w.engine_id for w in survivors}
            assert takeover.epoch == epoch + 1
            assert takeover.previous_expires_at == expires_at
            # Taken over only once the dead holder had expired, grace included.
            assert takeover.at_ms > takeover.previous_expires_at + GRACE_MS, (wid, takeover)
            latencies.append(takeover.at_ms - kill_ms)
            margins.append(takeover.at_ms - takeover.previous_expires_at - GRACE_MS)
        dead = EngineRecord.objects.get(pk=victim.engine_id)
        assert dead.stopped_at is None

        # Only the step in flight at the kill may have run twice.
        reruns = check_side_effects(chains, driver, events)
        print(
            f"\n[sigkill] killed {victim.engine_id} holding {len(held)} claims "
            f"({sum(1 for w in held if 'chain' in w)} chains); takeover after the kill: "
            f"{summary(latencies)}; after expiry + grace: {summary(margins)}; "
            f"steps run twice (in flight at the kill): {len(reruns)}"
        )
    finally:
        kill_all(workers)


# -- 3. SIGSTOP past expiry ---------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_sigstopped_engine_is_deposed_and_never_commits_at_an_old_epoch(tmp_path):
    assert connection.vendor == "postgresql"
    steps = 14
    workers: list[Worker] = []
    try:
        stopped = Worker("stop-a", tmp_path, "--concurrency", "2")
        other = Worker("stop-b", tmp_path, "--grace", "10")
        workers += [stopped, other]
        for worker in workers:
            worker.wait_booted(timeout=BOOT_TIMEOUT_S)
        # The other engine idles, stopped, while the first picks up everything:
        # two turns in flight, the other chains' turns queued, the "mixed" runs
        # parked on their async activity.
        stop_outside_transaction(other)
        driver = MixedDriver()
        for i in range(3):
            driver.start(f"stop-mix-{i}", f"s{i}", signal_now=False)
        wait_for(
            "every token handed out",
            lambda: AsyncToken.objects.count() >= 3,
            stopped,
            timeout=LOAD_TIMEOUT_S,
        )
        chains = start_chains("stop", 6, steps)
        wait_for(
            "two chains under way",
            lambda: chains_underway(chains, 1) >= 2,
            stopped,
            timeout=LOAD_TIMEOUT_S,
        )

        stop_outside_transaction(stopped)
        stop_ms = wall_ms()
        other.signal_group(signal.SIGCONT)
        held = held_by(stopped.engine_id)
        assert held, "the stopped engine held no claim"

        def all_taken_over() -> bool:
            return ClaimEvent.objects.filter(
                kind="takeover", previous_engine_id=stopped.engine_id, workflow_id__in=list(held)
            ).count() >= len(held)

        wait_for("every claim of the stopped engine taken over", all_taken_over, other)
        cont_ms = wall_ms()
        stopped.signal_group(signal.SIGCONT)

        def deposition_seen() -> dict[str, list[str]]:
            seen = {}
            for wid in held:
                lines = [
                    line
                    for line in stopped.lines_about(wid)
                    if any(marker in line for marker in DEPOSED_MARKERS)
                ]
                if not lines:
                    return {}
                seen[wid] = lines
            return seen

        observed = wait_for(
            "the resumed engine to notice every lost claim", deposition_seen, stopped, other
        )
        record = wait_for(
            "a heartbeat with the deposition counters",
            lambda: EngineRecord.objects.filter(
                pk=stopped.engine_id, heartbeat_at__gt=cont_ms + CHILD_RENEW_INTERVAL_MS
            ).first(),
            stopped,
        )
        attempts = record.metrics["attempts"]
        assert attempts["deposed"] >= 1, record.metrics
        assert record.metrics["renewal_failures"] >= 1, record.metrics

        # Its other workflows go on: once the other engine has left gracefully,
        # the very workflows it was deposed from (at newer epochs), and new work.
        other.signal_group(signal.SIGTERM)
        assert other.proc.wait(timeout=LOAD_TIMEOUT_S) == 0, other.log()
        more = start_chains("after", 3, 3)
        chains.update(more)
        wait_all_done(driver, [stopped], "the resumed engine to finish everything")

        check_runs_completed({k: v for k, v in chains.items() if k not in more}, driver, steps)
        check_runs_completed(more, None, 3)
        events, _ = check_every_journal()
        takeover_after_stop = []
        for wid, (epoch, _expires) in held.items():
            takeover = next(
                e
                for e in events[wid]
                if e.kind == "takeover" and e.previous_engine_id == stopped.engine_id
            )
            assert takeover.engine_id == other.engine_id
            assert takeover.epoch == epoch + 1
            assert takeover.at_ms > takeover.previous_expires_at + GRACE_MS, takeover
            takeover_after_stop.append(takeover.at_ms - stop_ms)
        # Nothing the stopped engine wrote carries an epoch that was already
        # superseded (check_every_journal), and after SIGCONT it wrote only
        # under epochs it was granted after SIGCONT.
        by_stopped = JournalEntry.objects.filter(engine_id=stopped.engine_id)
        late = list(by_stopped.filter(at_ms__gt=cont_ms).select_related("run"))
        assert late, "the resumed engine did no further work"
        for entry in late:
            grant = next(
                e
                for e in events[entry.run.workflow_id]
                if e.epoch == entry.epoch and e.kind in ("acquire", "takeover")
            )
            assert grant.engine_id == stopped.engine_id and grant.at_ms > cont_ms, (entry, grant)
        assert (
            not JournalEntry.objects.filter(run__workflow_id__in=list(more))
            .exclude(engine_id=stopped.engine_id)
            .exists()
        )

        reruns = check_side_effects(chains, driver, events)
        kinds = Counter(
            kind for lines in observed.values() for kind in {observation(line) for line in lines}
        )
        print(
            f"\n[sigstop] stopped {stopped.engine_id} holding {len(held)} claims; taken over "
            f"{summary(takeover_after_stop)} after SIGSTOP; after SIGCONT, workflows per signal "
            f"{dict(kinds)}; metrics at heartbeat: deposed {attempts['deposed']}, renewal "
            f"failures {record.metrics['renewal_failures']}; entries written after SIGCONT "
            f"{len(late)} (all at epochs granted after SIGCONT); steps run twice: {len(reruns)}"
        )
    finally:
        kill_all(workers)


# -- 4. cancel from the web process mid-turn ----------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_cancel_mid_turn_rotates_and_the_late_commit_is_refused(tmp_path):
    assert connection.vendor == "postgresql"
    workflow_id = "cancel-mid-turn"
    workers: list[Worker] = []
    try:
        workers = [Worker(f"cancel-{i}", tmp_path) for i in range(2)]
        for worker in workers:
            worker.wait_booted(timeout=BOOT_TIMEOUT_S)
        handle = client.start(
            "slow-chain", {"id": "cx", "steps": 3, "seconds": 1.5}, workflow_id=workflow_id
        )
        # Step 0 recorded, step 1 running: the owner is mid-turn.
        wait_for(
            "the second step to start",
            lambda: SideEffect.objects.filter(kind="slow", key="cx:1").exists(),
            *workers,
        )
        owner_id = WorkflowClaim.objects.get(pk=workflow_id).engine_id
        owner = next(w for w in workers if w.engine_id == owner_id)
        cancel_ms = wall_ms()
        client.cancel(workflow_id, reason="customer")
        assert handle.status() == "cancelled"

        # The owner's turn stops one of two ways: waiting on step 1, it sees the
        # run cancelled and abandons the attempt ("turn of ... aborted"); or, had
        # step 1 landed first, its commit is refused ("stopped driving": the
        # cancel rotated the claim, an operator's act, not a deposition).
        def turn_stopped() -> bool:
            refused = any("stopped driving" in line for line in owner.lines_about(workflow_id))
            return refused or f"turn of {workflow_id} aborted: " in owner.log()

        wait_for("the owner to stop its turn", turn_stopped, *workers)
        seen_ms = wall_ms()
        # Let every engine run a few more maintenance passes (hang protection only).
        for worker in workers:
            wait_for(
                f"{worker.engine_id} to heartbeat twice more",
                lambda w=worker: EngineRecord.objects.filter(
                    pk=w.engine_id, heartbeat_at__gt=seen_ms + 2 * CHILD_RENEW_INTERVAL_MS
                ).exists(),
                *workers,
            )

        run = WorkflowRun.objects.get(pk=handle.run_id)
        assert run.status == "cancelled"  # and stays so
        assert run.error["type"] == "Cancelled"
        events = list(ClaimEvent.objects.filter(workflow_id=workflow_id).order_by("id"))
        assert [(e.kind, e.epoch, e.engine_id) for e in events] == [
            ("acquire", 1, owner_id),
            ("rotate", 2, "client"),
        ], events
        rotate = events[1]
        assert rotate.previous_engine_id == owner_id
        claim = WorkflowClaim.objects.get(pk=workflow_id)
        assert (claim.epoch, claim.engine_id, claim.expires_at) == (2, None, None)
        # Nothing late was recorded: the journal holds only what was written
        # under epoch 1 before the rotation; step 1 ran but was never recorded.
        entries = list(JournalEntry.objects.filter(run_id=handle.run_id).order_by("position"))
        assert [e.result for e in entries if e.kind == "activity"] == ["cx:0"]
        assert all(e.epoch == 1 and e.engine_id == owner_id for e in entries), entries
        assert all(e.at_ms <= rotate.at_ms for e in entries)
        assert not JournalEntry.objects.filter(run_id=handle.run_id, epoch__gte=2).exists()
        counts = Counter(SideEffect.objects.filter(kind="slow").values_list("key", flat=True))
        assert counts == Counter({"cx:0": 1, "cx:1": 1}), counts
        metrics = EngineRecord.objects.get(pk=owner_id).metrics
        # The cancel is counted as what it is: a rotation, never a deposition.
        assert metrics["attempts"]["rotated"] >= 1, metrics
        assert metrics["attempts"]["deposed"] == 0, metrics
        assert metrics["renewal_failures"] == 0, metrics
        assert "another engine" not in owner.log()
        stopped_lines = [
            line
            for line in owner.log().splitlines()
            if "stopped driving" in line or f"turn of {workflow_id} aborted: " in line
        ]
        print(
            f"\n[cancel] owner {owner_id} stopped its turn; its log: {stopped_lines[0]!r}; "
            f"observed {seen_ms - cancel_ms} ms after the cancel (step 1 takes 1.5 s)"
        )
    finally:
        kill_all(workers)


# -- 5. owner-side polling without LISTEN ---------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_signal_reaches_idle_owner_without_listen_by_polling(tmp_path):
    assert connection.vendor == "postgresql"
    workers: list[Worker] = []
    try:
        quiet = Worker("quiet", tmp_path, "--no-listen")
        workers.append(quiet)
        quiet.wait_booted(timeout=BOOT_TIMEOUT_S)
        latencies = []
        for i in range(5):
            workflow_id = f"quiet-{i}"
            handle = client.start("signal-wait", {}, workflow_id=workflow_id)
            wait_for("the run to park", lambda h=handle: h.status() == "parked", quiet)
            sent_ms = wall_ms()
            client.signal(workflow_id, "go", i)
            assert handle.result(timeout=LOAD_TIMEOUT_S) == i
            consumed = JournalEntry.objects.get(run_id=handle.run_id, kind="signal")
            assert consumed.engine_id == "quiet"
            latencies.append(consumed.at_ms - sent_ms)
        assert listening("quiet") == 0
        # The probe itself works: a worker that LISTENs shows its connection.
        loud = Worker("loud", tmp_path)
        workers.append(loud)
        loud.wait_booted(timeout=BOOT_TIMEOUT_S)
        wait_for("the LISTEN connection of a listening worker", lambda: listening("loud"), loud)
        assert listening("quiet") == 0
        print(
            f"\n[no-listen] signal -> owner's turn recorded it (polling every 0.2 s): "
            f"{summary(latencies)}"
        )
    finally:
        kill_all(workers)


# -- 6. graceful shutdown under load ---------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_sigterm_under_load_hands_every_claim_over_before_expiry(tmp_path):
    assert connection.vendor == "postgresql"
    steps = 8
    workers: list[Worker] = []
    try:
        workers = [Worker(f"term-{i}", tmp_path, "--grace", "10") for i in range(3)]
        for worker in workers:
            worker.wait_booted(timeout=BOOT_TIMEOUT_S)
        chains = start_chains("term", 9, steps)
        driver = MixedDriver()
        for i in range(9):
            driver.start(f"term-mix-{i}", f"t{i}", signal_now=False)
        wait_for(
            "chains under way and every token handed out",
            lambda: AsyncToken.objects.count() >= 9 and chains_underway(chains) >= 2,
            *workers,
            timeout=LOAD_TIMEOUT_S,
        )
        victim = busiest(workers)
        survivors = [w for w in workers if w is not victim]
        before = held_by(victim.engine_id)
        assert before, "the stopping engine held no claim"
        term_ms = wall_ms()
        victim.signal_group(signal.SIGTERM)
        code = victim.proc.wait(timeout=LOAD_TIMEOUT_S)
        exit_ms = wall_ms()
        assert code == 0, victim.log()
        assert "Traceback" not in victim.log(), victim.log()
        assert EngineRecord.objects.get(pk=victim.engine_id).stopped_at is not None

        wait_all_done(driver, survivors, "the survivors to finish everything")
        check_runs_completed(chains, driver, steps)
        events, _ = check_every_journal()
        assert not ClaimEvent.objects.filter(
            kind="takeover", previous_engine_id=victim.engine_id
        ).exists()

        handed, lead, gap = 0, [], []
        for wid in before:
            evs = events[wid]
            releases = [
                e
                for e in evs
                if e.kind == "release" and e.engine_id == victim.engine_id and e.at_ms >= term_ms
            ]
            assert len(releases) == 1, (wid, evs)
            release = releases[0]
            if release.reason == "completed":
                continue  # finished inside the grace period
            assert release.reason == "", release
            handed += 1
            following = evs[evs.index(release) + 1]
            assert following.kind == "acquire", (wid, evs)  # not a takeover after expiry
            assert following.epoch == release.epoch + 1
            assert following.engine_id in {w.engine_id for w in survivors}
            old_expires_at = release.previous_expires_at
            assert old_expires_at is not None
            # The next holder did not wait for the old claim to expire.
            assert following.at_ms < old_expires_at, (wid, following, old_expires_at)
            lead.append(old_expires_at - following.at_ms)
            gap.append(following.at_ms - release.at_ms)
        assert handed >= 1, "no claim was handed over"
        # Graceful: the steps in flight finished inside the grace; nothing ran twice.
        assert not check_side_effects(chains, driver, events)
        print(
            f"\n[sigterm] {victim.engine_id} held {len(before)} claims, exited "
            f"{exit_ms - term_ms} ms after SIGTERM; {handed} handed over: next claimed_at "
            f"after the release {summary(gap)}, before the old expires_at {summary(lead)}"
        )
    finally:
        kill_all(workers)


# -- gates at every boot ----------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("first", "second"),
    [("workflow-lease", "lease"), ("workflow-lease", "none"), ("lease", "workflow-lease")],
)
def test_second_engine_of_another_mode_refuses_to_start(tmp_path, first, second):
    assert connection.vendor == "postgresql"
    workers: list[Worker] = []
    try:
        established = Worker("gate-first", tmp_path, env={"WEFT_OWNERSHIP": first})
        workers.append(established)
        established.wait_booted(timeout=BOOT_TIMEOUT_S)
        marker = OwnershipModeMarker.objects.get()
        assert marker.mode == first

        def state() -> tuple[Any, ...]:
            return (
                list(EngineRecord.objects.order_by("pk").values_list("pk", "started_at")),
                list(OwnershipModeMarker.objects.values_list("mode", "established_at")),
                list(GlobalLease.objects.values_list("epoch", "holder_id")),
                WorkflowClaim.objects.count(),
                ClaimEvent.objects.count(),
            )

        before = state()
        refused = Worker("gate-second", tmp_path, env={"WEFT_OWNERSHIP": second})
        workers.append(refused)
        code = refused.proc.wait(timeout=BOOT_TIMEOUT_S)
        log = refused.log()
        assert code != 0, log
        assert "OwnershipModeMismatchError" in log, log
        assert f"OWNERSHIP={second!r}" in log and f"records {first!r}" in log, log
        assert "Traceback" not in log, log
        assert not EngineRecord.objects.filter(pk="gate-second").exists()
        after = state()
        if first == "lease":  # the established lease holder renews meanwhile
            before, after = before[:2] + before[3:], after[:2] + after[3:]
        assert after == before
        assert established.proc.poll() is None  # the first engine is unaffected
        message = next(line for line in log.splitlines() if "OwnershipModeMismatchError" in line)
        print(f"\n[gate] {first} then {second}: exit {code}: {message[:160]}")
    finally:
        kill_all(workers)
