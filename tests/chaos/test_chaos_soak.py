"""The CI-bounded chaos soak: ``python -m devtools.chaos``
as a child process, 3 engines (2 standalone, 1 Celery node), 40 workflows
using every ``ctx`` command, one fault of every kind on a fixed seed — kill +
restart, pause past the TTL, backends terminated mid-transaction, a partition
longer than the TTL, dropped and duplicated wakes, a PostgreSQL server restart,
a broker outage, a clock step forward and back, a kill while holding an atomic
step's transaction, a queue slot or a schedule tick.

Why a child process: the soak restarts its PostgreSQL server and stops its
broker, so it runs on its own (``devtools.chaos.services``: a private cluster and
Redis on free ports), never on pytest's test database nor the shared servers
the rest of the suite uses in parallel.

Asserted from the child's audit (``--json``; ``devtools.chaos.check``, from
durable records only): nothing lost, no journal position written twice, no
write by a non-holder, no early takeover, no stuck claim, every duplicate
activity execution explained by a fault on the engine that ran it, every
atomic step applied exactly once. The workload also covers the newer
capabilities (issue #21), each asserted to have happened and to have kept its
promise: a schedule ticking every second (each tick fired once, none missed),
a queue with a concurrency and a rate limit (never exceeded, from the
journal), updates sent with ids, some twice (each applied once), a published
event and stream (nothing lost or reordered), detached children, cancels with
a grace (cleanup exactly once); and no deadlock, neither in the engine logs
nor in PostgreSQL's own count (``pg_stat_database.deadlocks``). And flow
control and poison containment (``check_flow``): children and schedule runs
through a queue (its concurrency never exceeded), a fair queue (no small key
starved), debounce bursts (one run each, with the last input), and a poison
activity and body that exit their engine (contained: ``ActivityError`` after
the retries, ``CrashLoopError`` after the recovery bound; every dead engine
restarted, none down at the end). The figures
are printed (``-s``); no duration is asserted. ``processes`` tier (needs
PostgreSQL's binaries and redis-server, as CI's machine has them).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from devtools.chaos.injector import FAULT_KINDS
from devtools.procs import REPO_ROOT, child_env

pytestmark = [pytest.mark.processes]

#: Chosen among seeds whose planned outages are short (the whole run ~1.5 min).
SEED = 44
WORKFLOWS = 40


def test_chaos_soak_loses_nothing_and_never_writes_twice(tmp_path):
    report = tmp_path / "audit.json"
    command = [
        sys.executable,
        "-m",
        "devtools.chaos",
        "--engines=3",
        "--celery=1",
        f"--workflows={WORKFLOWS}",
        f"--faults={len(FAULT_KINDS)}",
        f"--seed={SEED}",
        f"--logs={tmp_path / 'logs'}",
        f"--json={report}",
        "--timeout=240",
    ]
    # DATABASE_URL is replaced by the child's own cluster; hang protection only.
    done = subprocess.run(
        command,
        cwd=REPO_ROOT,
        env=child_env("postgres://unused/unused"),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    print(done.stderr[-20_000:])
    print(done.stdout)
    assert report.exists(), f"the soak wrote no audit (exit {done.returncode})"
    result = json.loads(report.read_text())
    audit = result["audit"]
    assert sorted(audit["faults"]) == sorted(FAULT_KINDS), audit["faults"]
    assert audit["workflows"] == WORKFLOWS
    for name in (
        "lost",
        "terminal_twice",
        "double_written",
        "non_holder",
        "early_takeovers",
        "duplicates_unexplained",
        "stuck",
        "atomic_double_applied",
        "atomic_lost",
        "atomic_unrecorded",
    ):
        assert audit[name] == [], (name, audit[name])
    assert audit["atomic_steps"] > 0
    # The newer capabilities happened ...
    assert audit["schedule_ticks"] > 0
    assert audit["queue_runs"] > 0 and audit["activity_queue_steps"] > 0
    assert audit["updates_sent"] > 0 and audit["updates_resent"] > 0
    assert audit["updates_applied"] == audit["updates_sent"]
    assert audit["stream_entries"] > 0
    assert audit["detached"] > 0
    assert audit["cancels"] > 0
    # ... and kept their promises.
    for name in (
        "schedule_ticks_twice",
        "schedule_ticks_missed",
        "queue_limit_exceeded",
        "update_applied_twice",
        "update_lost",
        "events_lost_or_reordered",
        "cleanup_twice",
        "cleanup_missing",
    ):
        assert audit[name] == [], (name, audit[name])
    # Flow control and poison containment (``check_flow``) happened ...
    assert audit["child_queue_runs"] > 0 and audit["schedule_triggers"] > 0
    assert audit["fair_admissions"] > 0 and audit["fair_queue_runs"] > 0
    assert audit["debounce_bursts"] > 0 and audit["debounce_calls"] > audit["debounce_bursts"]
    assert audit["poison_runs"] == 2 and audit["engine_crashes"] > 0
    # ... and kept their promises.
    for name in ("fair_starved", "debounce_violations", "poison_uncontained", "engines_down"):
        assert audit[name] == [], (name, audit[name])
    assert audit["deadlocks"] == 0, audit["deadlock_lines"][:5]
    assert audit["pg_deadlocks"] == 0
    assert result["violations"] == 0
    assert done.returncode == 0, done.stdout
