"""Commits per workflow (SPEC §4.2): three activities, at most 5 commits plus one
per activity attempt for its started record (crash-loop containment). Each
attempt's history row (``ActivityAttempt``) rides on the commit of its outcome.

How commits are counted (exact, not sampled): ``CommitCounter`` from
``benchmarks/commits_per_workflow.py`` — the benchmark publishes the same
figure with the same code. An in-process ``Engine(clock=<fake clock>,
background_tasks="manual")`` drives the run on the test's own thread, so
``client.start`` and every engine statement use ONE Django connection. On
that connection a ``connection.execute_wrapper`` sees every statement
together with ``in_atomic_block``, and ``connection.commit`` /
``connection.rollback`` are wrapped on the instance (Django calls exactly
these when an outermost ``transaction.atomic()`` ends). A transaction is
either an outermost atomic block or one autocommit statement; a *write
commit* is a committed one with an INSERT, UPDATE or DELETE. Statements run
inside activities (the demo's ``SideEffect`` rows: user code, not the
engine) are never seen: they run on the activity executor's own threads and
connections; NOTIFYs sent on
commit and read-only transactions are reported, not counted. The fake clock
never moves, so no heartbeat or renewal falls into the window.

``pg_stat_database.xact_commit`` (flushed with ``pg_stat_force_next_flush()``,
read after ``pg_stat_clear_snapshot()``) is read before and after as a
cross-check of the counter's total (reads included); it can only be larger
(another session such as autovacuum may commit in the same database).

PostgreSQL only (the ``processes`` tier, deselected on the SQLite leg).
"""

from __future__ import annotations

import pytest
from django.db import connection, connections

from benchmarks.commits_per_workflow import measure_three_steps
from weft_django.engine import Engine
from weft_django.models import ActivityAttempt, ClaimEvent
from weft_django.testing import FakeClock

pytestmark = [pytest.mark.processes]

#: SPEC §4.2's 5, plus the fenced started record each of the three attempts writes
#: before its code runs (so an attempt its engine's death cut short is counted).
SPEC_MAX_COMMITS = 5 + 3


@pytest.mark.django_db(transaction=True)
def test_three_activity_workflow_takes_at_most_five_commits():
    assert connection.vendor == "postgresql"
    engine = Engine(clock=FakeClock(), background_tasks="manual")
    try:
        figures = measure_three_steps(engine, connections[engine.settings.database], "commits-1")
    finally:
        engine.dispose(grace=0)

    assert figures["status"] == "completed", figures
    assert figures["result"] == [
        "reserved:commits-1",
        {"order": "commits-1", "charged": 1},
        "shipped:commits-1",
    ]
    n = figures["write_commits"]
    print(
        f"\n[commits] three-steps: {n} write commits from client.start to completion "
        f"(tables {figures['write_commit_tables']}); read-only {figures['read_only_commits']}, "
        f"NOTIFY {figures['notify_commits']}, rollbacks {figures['rollbacks']}; "
        f"all commits {figures['all_commits']} "
        f"(+ {figures['reconnects']} reconnects) vs pg_stat xact_commit delta "
        f"{figures['pg_stat_xact_commit_delta']}"
    )
    assert n <= SPEC_MAX_COMMITS, figures
    # Sanity of the counter: every transaction it saw is one PostgreSQL counted.
    assert figures["pg_stat_xact_commit_delta"] >= figures["all_commits"], figures
    # Each attempt's history row rode on the commit of its outcome: no commit of its own.
    tried = ActivityAttempt.objects.filter(run__workflow_id="commits-1").order_by("position")
    assert [(a.position, a.outcome) for a in tried] == [(0, "ok"), (1, "ok"), (2, "ok")]
    with_rows = [t for t in figures["write_commit_tables"] if "weft_activityattempt" in t]
    assert len(with_rows) == 3 and all("weft_journalentry" in t for t in with_rows), figures
    # The claim was acquired at pickup and released by the terminal commit.
    assert [e.kind for e in ClaimEvent.objects.filter(workflow_id="commits-1")] == [
        "acquire",
        "release",
    ]


#: A signal wake: the client's start and signal, the pickup, the park, the wake
#: turn's started mark (so a wake that kills its engine is counted, see
#: ``engine.turn.failures``) and the terminal commit.
SIGNAL_WAKE_MAX_COMMITS = 6


@pytest.mark.django_db(transaction=True)
def test_a_signal_wake_adds_one_commit_for_its_started_mark():
    from benchmarks.commits_per_workflow import CommitCounter
    from weft_django import client
    from weft_django.models import WorkflowRun

    engine = Engine(clock=FakeClock(), background_tasks="manual")
    try:
        engine.boot()
        engine.run_maintenance()
        counter = CommitCounter(connections[engine.settings.database])
        with counter.watching(engine):
            handle = client.start("signal-wait", {}, workflow_id="commits-wake")
            engine.run_until_idle(timeout=60)
            parked = WorkflowRun.objects.get(pk=handle.run_id).status
            client.signal("commits-wake", "go", "ok")
            engine.run_until_idle(timeout=60)
    finally:
        engine.dispose(grace=0)
    run = WorkflowRun.objects.get(pk=handle.run_id)
    figures = counter.summary()
    # The engine's claim renewals (each maintenance pass renews what it holds)
    # are the engine's, not the workflow's: not counted.
    tables = [t for t in figures["write_commit_tables"] if t != ["weft_workflowclaim"]]
    print(f"\n[commits] signal-wait: {len(tables)} write commits (tables {tables}); {figures}")
    assert parked == "parked"
    assert (run.status, run.result) == ("completed", "ok")
    assert len(tables) <= SIGNAL_WAKE_MAX_COMMITS, figures
