"""What a fair queue's admission orders by, read in ONE statement.

Why: the fair order (``engine.queues.fair``) needs, of the queue's due pending
runs, each ``(priority, fairness key, concurrency key)`` group's size,
weight and oldest runs, and, of the queue's slot rows, each fairness key's
most recent admissions. Read as three ORM queries (an aggregate, a window
over the slots, a window over the picked groups) they were three compiles
and three round trips inside the queue lock, which made a fair admission
cost a third more CPU than a FIFO one. Here they are one portable statement
(window functions: PostgreSQL, SQLite >= 3.25), built once per alias.

The candidates are ``pickup.pending_due(queued=True).filter(queue=...)``
(pending, ``start_at`` due or none, of the queue:
``tests/db/test_fair_rows.py`` pins the twin). Each group returns its
``depth`` oldest runs, where depth is ``ceil(want / groups)``: a round robin
over the groups takes about that many of each; a group that is given more
picks than it returned ids asks ``oldest_of_groups`` for the rest. This
statement only reads: the admission locks, re-counts and commits as before.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.db import connections

from weft_django.db.base import table
from weft_django.models import QueueSlot, WorkflowRun

#: alias → the statement, built once (table names are quoted per alias).
_BUILT: dict[str, str] = {}

GroupKey = tuple[int, Any, Any]
"""``(priority, fairness_key, concurrency_key)``."""


@dataclass
class FairRows:
    """One read of a fair queue's waiting runs and its admission history."""

    #: group → ``[waiting, oldest created_at, fairness_weight (max, may be None)]``.
    groups: dict[GroupKey, list[Any]] = field(default_factory=dict)
    #: group → the ids of its oldest waiting runs (at most the depth), oldest first.
    ids: dict[GroupKey, list[str]] = field(default_factory=dict)
    #: fairness key → its most recent admission instants (at most its weight), latest first.
    history: dict[Any, list[int]] = field(default_factory=dict)


def _statement(using: str) -> str:
    sql = _BUILT.get(using)
    if sql is not None:
        return sql
    runs, slots = table(WorkflowRun, using), table(QueueSlot, using)
    group = "PARTITION BY priority, fairness_key, concurrency_key"
    sql = _BUILT[using] = (
        "WITH c AS (SELECT priority, fairness_key, concurrency_key, workflow_id, created_at, "
        f"ROW_NUMBER() OVER ({group} ORDER BY created_at, workflow_id) AS rn, "
        f"COUNT(*) OVER ({group}) AS n, "
        f"MAX(fairness_weight) OVER ({group}) AS w "
        f"FROM {runs} WHERE status = 'pending' AND (start_at IS NULL OR start_at <= %s) "
        "AND queue = %s), "
        "g AS (SELECT COUNT(*) AS groups FROM c WHERE rn = 1), "
        "k AS (SELECT fairness_key, MAX(CASE WHEN w IS NULL OR w < 1 THEN 1 ELSE w END) AS w "
        "FROM c WHERE rn = 1 GROUP BY fairness_key), "
        "h AS (SELECT s.fairness_key, s.admitted_at, k.w, ROW_NUMBER() OVER "
        "(PARTITION BY s.fairness_key ORDER BY s.admitted_at DESC) AS r "
        f"FROM {slots} s JOIN k ON (s.fairness_key = k.fairness_key "
        "OR (s.fairness_key IS NULL AND k.fairness_key IS NULL)) "
        "WHERE s.queue = %s AND s.position IS NULL AND s.counts_for_rate) "
        "SELECT 0, priority, fairness_key, concurrency_key, workflow_id, created_at, n, w, rn "
        "FROM c WHERE rn <= (%s + (SELECT groups FROM g) - 1) / NULLIF((SELECT groups FROM g), 0) "
        "UNION ALL "
        "SELECT 1, 0, fairness_key, NULL, NULL, NULL, admitted_at, NULL, r FROM h WHERE r <= w"
    )
    return sql


def fair_rows(using: str, queue: str, now_ms: int, want: int) -> FairRows:
    """The waiting groups of ``queue`` (due at ``now_ms``), their oldest ids
    (deep enough for ``want`` picks spread over the groups) and the history."""
    with connections[using].cursor() as cursor:
        cursor.execute(_statement(using), [now_ms, queue, queue, max(want, 1)])
        rows = cursor.fetchall()
    out = FairRows()
    history: list[tuple[Any, int, int]] = []
    picked: list[tuple[int, GroupKey, str]] = []
    for kind, priority, fkey, ckey, workflow_id, created_at, n, weight, rank in rows:
        if kind:
            history.append((fkey, rank, n))
            continue
        key = (priority, fkey, ckey)
        if rank == 1:
            out.groups[key] = [n, created_at, weight]
        picked.append((rank, key, workflow_id))
    for _, key, workflow_id in sorted(picked, key=lambda row: row[0]):
        out.ids.setdefault(key, []).append(workflow_id)
    for fkey, _, at in sorted(history, key=lambda row: row[1]):
        out.history.setdefault(fkey, []).append(at)
    return out


__all__ = ["FairRows", "GroupKey", "fair_rows"]
