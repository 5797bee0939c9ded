"""The CI-bounded chaos soak (issue #8): 3 engines (2 standalone, 1 Celery
node), 40 workflows using every ``ctx`` command, 6 faults on a fixed seed —
one of each kind: kill + restart, pause past the TTL, backends terminated
mid-transaction, a partition longer than the TTL, dropped and duplicated
wakes. ``python -m tests.chaos`` (``scripts/chaos``) runs the same harness
for long soaks.

Asserted from durable records only (``tests.chaos.check``): nothing lost,
no journal position written twice, no write by a non-holder, no early
takeover, no stuck claim, every duplicate activity execution explained by a
fault on the engine that ran it, and every atomic step applied exactly once
(``atomic_double_applied``: none, whatever the faults). The workload also
covers the newer capabilities (issue #21), each asserted to have happened and
to have kept its promise: a schedule ticking every second (each tick fired
once, none missed), a queue with a concurrency and a rate limit (never
exceeded, from the journal), updates sent with ids, some twice (each applied
once), a published event and stream (nothing lost or reordered), detached
children, cancels with a grace (cleanup exactly once), and no 'deadlock
detected' in the engine logs. The figures are printed (``-s``); no duration
is asserted. PostgreSQL only (``processes`` tier).
"""

from __future__ import annotations

import os

import pytest
from django.db import connection

from tests.chaos.harness import ChaosConfig, run_chaos
from tests.chaos.injector import FAULT_KINDS

pytestmark = [pytest.mark.processes, pytest.mark.django_db(transaction=True)]

SEED = 8


def test_chaos_soak_loses_nothing_and_never_writes_twice(tmp_path):
    assert connection.vendor == "postgresql", "the chaos soak runs on PostgreSQL only"
    config = ChaosConfig(
        engines=3,
        celery=1,
        workflows=40,
        faults=len(FAULT_KINDS),
        seed=SEED,
        logs=tmp_path,
        # Its own Redis database (flushed first); another one when runs overlap.
        broker=os.environ.get("WEFT_CHAOS_BROKER", "redis://127.0.0.1:6379/12"),
        drain_timeout_s=240,
    )
    result = run_chaos(config, progress=print)
    for record in result.faults:
        print(f"fault {record.kind} {record.target} ({record.engine_id}): {record.detail}")
    print(result.audit.details())
    print(result.summary)
    audit = result.audit
    assert set(audit.faults) == set(FAULT_KINDS), audit.faults
    assert audit.workflows == 40
    assert audit.lost == []
    assert audit.terminal_twice == []
    assert audit.double_written == []
    assert audit.non_holder == []
    assert audit.early_takeovers == []
    assert audit.duplicates_unexplained == []
    assert audit.stuck == []
    assert audit.atomic_steps > 0
    assert audit.atomic_double_applied == []
    assert audit.atomic_lost == []
    assert audit.atomic_unrecorded == []
    # The newer capabilities happened...
    assert audit.schedule_ticks > 0
    assert audit.queue_runs > 0 and audit.activity_queue_steps > 0
    assert audit.updates_sent > 0 and audit.updates_resent > 0
    assert audit.updates_applied == audit.updates_sent
    assert audit.stream_entries > 0
    assert audit.detached > 0
    assert audit.cancels > 0
    # ... and kept their promises.
    assert audit.schedule_ticks_twice == []
    assert audit.schedule_ticks_missed == []
    assert audit.queue_limit_exceeded == []
    assert audit.update_applied_twice == []
    assert audit.update_lost == []
    assert audit.events_lost_or_reordered == []
    assert audit.cleanup_twice == []
    assert audit.cleanup_missing == []
    assert audit.deadlocks == 0, audit.deadlock_lines[:5]
