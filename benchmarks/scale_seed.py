"""Set-based seeding of a parked history (``benchmarks.scale``, ``tests/db/test_query_plans``).

Why SQL and not the engine: 100,000 parked workflows through real turns
would take hours; ``INSERT … SELECT … FROM generate_series`` writes them in
seconds. What matters is that the rows are exactly the rows a real parked
workflow has, so the queries measured meet the table shapes they meet in
production. They were read off real runs (two workflows started through
``client.start`` and driven by an engine until they parked):

- ``bench-sleeper`` parked on ``ctx.sleep``: the run ``parked`` with
  ``version`` 3, ``started_at`` / ``turn_started_at`` / ``turn_pid`` set and
  ``wake_at`` = its timer's ``fire_at``; ONE ``Timer`` (kind ``sleep``, the
  command's position, the holder's engine id and epoch);
- ``bench-parked`` parked on ``ctx.wait_for_signal``: the same run row with
  ``wake_at`` NULL and no timer;
- each: its ``WorkflowClaim`` (epoch 1, held by a live engine, expiring in
  the future), ONE ``ClaimEvent`` (``acquire``), and its journal
  (``JournalEntry`` rows ``activity`` at positions 0..k-1, each with the
  holder's engine id, epoch 1 and ``at_ms``).

Workflow ``g`` (1-based) is ``scale-<g:07d>``: odd ``g`` sleep, even ``g``
wait for a signal; its claim belongs to engine ``holder_of(g)``. Seeding is
incremental (``first``..``last``), so the large history is the small one
plus the rest: the same rows are measured twice. Run ``1`` (a signal
waiter) has a long journal (``long_journal`` entries): the run page
measured. ``ANALYZE`` after seeding, as autovacuum would have by then.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

#: The engine the benchmark measures: it holds the claims of workflows 1..``held``.
MEASURED_ENGINE = "scale-engine-00"
#: Far enough ahead that no seeded claim expires (nor any timer falls due) while measuring.
HORIZON_MS = 24 * 3600 * 1000


@dataclass(frozen=True)
class SeedShape:
    """How a seeded history is spread: claims over engines, journal per run."""

    #: Claims the measured engine holds (workflows 1..held).
    held: int = 500
    #: Other live engines sharing the rest of the claims (round robin).
    other_engines: int = 9
    journal_per_run: int = 10
    long_journal: int = 1_000

    def holder_sql(self) -> str:
        """SQL expression (over ``g``) of the engine holding workflow ``g``'s claim."""
        others = int(self.other_engines)
        return (
            f"CASE WHEN g <= {int(self.held)} THEN '{MEASURED_ENGINE}' "
            f"ELSE 'scale-engine-' || lpad((1 + mod(g, {others}))::text, 2, '0') END"
        )

    def engine_ids(self) -> list[str]:
        return [f"scale-engine-{k:02d}" for k in range(1, self.other_engines + 1)]


def workflow_id(g: int) -> str:
    return f"scale-{g:07d}"


def seed_engines(cursor: Any, shape: SeedShape, now_ms: int) -> None:
    """Live engine records of the other holders: heartbeat now, no presence key
    (so they stay on the TTL path: never "gone" while their claims are unexpired)."""
    cursor.execute(
        "INSERT INTO weft_enginerecord (engine_id, node_name, host, pid, mode, pool, "
        "transport, started_at, heartbeat_at, stopped_at, metrics, presence_key) "
        "SELECT e, '', 'scale-seed', NULL, 'workflow-lease', '', 'polling', %s, %s, NULL, "
        "'{}'::jsonb, NULL FROM unnest(%s::text[]) AS e "
        "ON CONFLICT (engine_id) DO UPDATE SET heartbeat_at = EXCLUDED.heartbeat_at",
        [now_ms, now_ms, shape.engine_ids()],
    )


def seed_parked(cursor: Any, first: int, last: int, shape: SeedShape, now_ms: int) -> int:
    """Workflows ``first``..``last`` parked, with claims, claim events, timers and
    journals; returns the journal rows written."""
    if last < first:
        return 0
    holder = shape.holder_sql()
    rng = [first, last]
    # Newest first is workflow 1: workflow g was created g * 5 minutes ago (100,000
    # workflows span about a year), started 20 ms later, parked 60 ms later.
    cursor.execute(
        "INSERT INTO weft_workflowrun (id, workflow_id, name, status, input, version, wake_at, "
        "wake_seq, parked_seq, turn_started_at, turn_pid, suspended_reason, created_at, "
        "updated_at, started_at, turn_failures, cancel_reason, priority, fairness_weight) "
        "SELECT md5('scale-run-' || g)::uuid, 'scale-' || lpad(g::text, 7, '0'), "
        "CASE WHEN mod(g, 2) = 1 THEN 'bench-sleeper' ELSE 'bench-parked' END, 'parked', "
        "CASE WHEN mod(g, 2) = 1 THEN jsonb_build_object('seconds', 86400, 'id', g) "
        "ELSE '{}'::jsonb END, 3, "
        "CASE WHEN mod(g, 2) = 1 THEN %s + g ELSE NULL END, 0, 0, %s, 4242, '', "
        "c, c + interval '60 ms', c + interval '20 ms', 0, '', 0, 1 "
        "FROM generate_series(%s, %s) AS g, "
        "LATERAL (SELECT now() - g * interval '5 minutes') AS t(c)",
        [now_ms + HORIZON_MS, now_ms, *rng],
    )
    cursor.execute(
        "INSERT INTO weft_workflowclaim (workflow_id, epoch, engine_id, expires_at, claimed_at) "
        f"SELECT 'scale-' || lpad(g::text, 7, '0'), 1, {holder}, %s, %s "
        "FROM generate_series(%s, %s) AS g",
        [now_ms + HORIZON_MS, now_ms, *rng],
    )
    cursor.execute(
        "INSERT INTO weft_claimevent (workflow_id, epoch, engine_id, kind, at_ms, reason, "
        "previous_engine_id, previous_expires_at) "
        f"SELECT 'scale-' || lpad(g::text, 7, '0'), 1, {holder}, 'acquire', %s, '', '', NULL "
        "FROM generate_series(%s, %s) AS g",
        [now_ms, *rng],
    )
    cursor.execute(
        "INSERT INTO weft_timer (position, kind, fire_at, dispatched_at, engine_id, epoch, "
        "payload, run_id) "
        f"SELECT %s, 'sleep', %s + g, NULL, {holder}, 1, '{{}}'::jsonb, "
        "md5('scale-run-' || g)::uuid "
        "FROM generate_series(%s, %s) AS g WHERE mod(g, 2) = 1",
        [shape.journal_per_run, now_ms + HORIZON_MS, *rng],
    )
    cursor.execute(
        "INSERT INTO weft_journalentry (position, kind, command, target, result, error, "
        "engine_id, epoch, at_ms, run_id) "
        f"SELECT p, 'activity', p, 'bench.trivial', to_jsonb(p), NULL, {holder}, 1, %s + p, "
        "md5('scale-run-' || g)::uuid "
        "FROM generate_series(%s, %s) AS g, "
        "LATERAL generate_series(0, CASE WHEN g = 1 THEN %s ELSE %s END - 1) AS p",
        [now_ms, *rng, shape.long_journal, shape.journal_per_run],
    )
    return int(cursor.rowcount)


def analyze(cursor: Any) -> None:
    """Statistics for the planner, as autovacuum would have them by now."""
    for table in (
        "weft_workflowrun",
        "weft_workflowclaim",
        "weft_claimevent",
        "weft_timer",
        "weft_journalentry",
        "weft_enginerecord",
    ):
        cursor.execute(f"ANALYZE {table}")


def insert_pending(cursor: Any, prefix: str, count: int) -> None:
    """``count`` pending runs ``<prefix>-<k>`` (what ``client.start`` writes: no claim yet)."""
    cursor.execute(
        "INSERT INTO weft_workflowrun (id, workflow_id, name, status, input, version, "
        "wake_seq, parked_seq, suspended_reason, created_at, updated_at, turn_failures, "
        "cancel_reason, priority, fairness_weight) "
        "SELECT gen_random_uuid(), %s || '-' || k, 'bench-sleeper', 'pending', "
        "jsonb_build_object('seconds', 86400), 0, 0, 0, '', now(), now(), 0, '', 0, 1 "
        "FROM generate_series(1, %s) AS k",
        [prefix, count],
    )


def delete_prefixed(cursor: Any, prefix: str) -> None:
    """Remove the runs ``<prefix>-*`` with their claims and claim events."""
    like = prefix + "-%"
    cursor.execute("DELETE FROM weft_claimevent WHERE workflow_id LIKE %s", [like])
    cursor.execute("DELETE FROM weft_workflowclaim WHERE workflow_id LIKE %s", [like])
    cursor.execute("DELETE FROM weft_workflowrun WHERE workflow_id LIKE %s", [like])


__all__ = [
    "HORIZON_MS",
    "MEASURED_ENGINE",
    "SeedShape",
    "analyze",
    "delete_prefixed",
    "insert_pending",
    "seed_engines",
    "seed_parked",
    "workflow_id",
]
