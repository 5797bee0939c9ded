"""PostgreSQL's batch pickup statements: claims first, then runs, never waiting.

The batch pickup locks many workflows' rows at once, so it must keep the global lock order
(docs/reference/lock-order.md: claims in workflow-id order, then runs). The order kept:

1. ``lock_pending_claims_skip_locked`` -- ONE statement: the due pending runs
   are read *without* a lock (``cand``), their claim rows are created where
   missing (``ins``, in workflow-id order) and the existing ones locked with
   ``SKIP LOCKED`` (``old``). The insert may wait for another transaction
   inserting or updating the same claim row -- while this transaction holds
   no run and only claims of smaller ids, so no cycle can close.
2. ``pending_runs_skip_locked`` -- the runs of the claims just locked, re-read
   under ``FOR UPDATE SKIP LOCKED`` with the same filters (a run taken or
   changed since step 1 drops out).

Locking the runs first and then inserting a claim row would deadlock with a one-at-a-time
acquire (which inserts the claim, then locks claim and run): the pickup would wait for
that uncommitted claim insert while holding the run the acquire waits for.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from django.db import connections

from weft_django.db.base import ClaimRow, table
from weft_django.models import WorkflowClaim, WorkflowRun

CLAIM_COLUMNS = "workflow_id, epoch, engine_id, expires_at, claimed_at"


def _due_filter(excluded_queues: Sequence[str]) -> str:
    """``pickup.pending_due``'s filter (``tests/db/test_batch_pickup.py`` pins it)."""
    queues = " AND (queue IS NULL OR NOT (queue = ANY(%s)))" if excluded_queues else ""
    return f"status = 'pending' AND (start_at IS NULL OR start_at <= %s){queues}"


def _due_params(now_ms: int, excluded_queues: Sequence[str]) -> list[Any]:
    return [now_ms, *([list(excluded_queues)] if excluded_queues else [])]


def any_pending_statement(using: str, mark: str) -> str:
    """Is any of the workflows ``%s`` (a list) still pending? The pickup
    routing's fallback gate (``transports.notify.pickup_route``): one indexed
    read on the listener's own connection, no transaction, no lock. It
    carries ``mark`` as a comment: the session's last statement is how the
    other engines see it among the peers."""
    return (
        f"SELECT /* {mark} */ EXISTS (SELECT 1 FROM {table(WorkflowRun, using)} "
        "WHERE workflow_id = ANY(%s) AND status = 'pending')"
    )


class PickupStatements:
    """Mixin of ``PostgreSQLOps``: the statements, built once per shape."""

    #: Set by ``PostgreSQLOps.__init__``: statement per (kind, alias, with queues).
    _pickup_sql: dict[tuple[str, str, bool], str]

    def _built(self, key: tuple[str, str, bool], build: Callable[[], str]) -> str:
        sql = self._pickup_sql.get(key)
        if sql is None:
            sql = self._pickup_sql[key] = build()
        return sql

    def lock_pending_claims_skip_locked(
        self, using: str, now_ms: int, excluded_queues: Sequence[str], limit: int
    ) -> dict[str, ClaimRow]:
        """Step 1: the claim rows of up to ``limit`` due pending runs (highest
        priority first, then oldest), ensured and locked without waiting for a locked row."""
        runs, claims = table(WorkflowRun, using), table(WorkflowClaim, using)

        def build() -> str:
            return (
                f"WITH cand AS (SELECT workflow_id FROM {runs} "
                f"WHERE {_due_filter(excluded_queues)} "
                "ORDER BY priority DESC, created_at LIMIT %s), "
                f"ins AS (INSERT INTO {claims} (workflow_id, epoch) "
                "SELECT DISTINCT workflow_id, 0 FROM cand ORDER BY 1 "
                f"ON CONFLICT DO NOTHING RETURNING {CLAIM_COLUMNS}), "
                f"old AS (SELECT {CLAIM_COLUMNS} FROM {claims} "
                "WHERE workflow_id IN (SELECT workflow_id FROM cand) "
                "ORDER BY workflow_id FOR UPDATE SKIP LOCKED) "
                f"SELECT {CLAIM_COLUMNS} FROM ins UNION ALL SELECT {CLAIM_COLUMNS} FROM old"
            )

        sql = self._built(("claims", using, bool(excluded_queues)), build)
        with connections[using].cursor() as cursor:
            cursor.execute(sql, [*_due_params(now_ms, excluded_queues), limit])
            return {w: (e, g, x, c) for w, e, g, x, c in cursor.fetchall()}

    def pending_runs_skip_locked(
        self,
        using: str,
        now_ms: int,
        excluded_queues: Sequence[str],
        limit: int,
        workflow_ids: Sequence[str] | None = None,
    ) -> list[WorkflowRun]:
        """``pickup.pending_due`` with ``select_for_update(skip_locked=True)``
        (only the runs of ``workflow_ids``, when given: step 2), built once per
        shape -- compiling the ORM query was the largest share of a poll thread
        at several engines."""
        runs = table(WorkflowRun, using)

        def build() -> str:
            quote = connections[using].ops.quote_name
            columns = ", ".join(
                quote(f.column) for f in WorkflowRun._meta.concrete_fields if f.column
            )
            only = " AND workflow_id = ANY(%s)" if workflow_ids is not None else ""
            return (
                f"SELECT {columns} FROM {runs} WHERE {_due_filter(excluded_queues)}{only} "
                "ORDER BY priority DESC, created_at LIMIT %s FOR UPDATE SKIP LOCKED"
            )

        key = ("runs" if workflow_ids is None else "runs-of", using, bool(excluded_queues))
        sql = self._built(key, build)
        params = _due_params(now_ms, excluded_queues)
        if workflow_ids is not None:
            params.append(sorted(set(workflow_ids)))
        return list(WorkflowRun.objects.using(using).raw(sql, [*params, limit]))


__all__ = ["CLAIM_COLUMNS", "PickupStatements", "any_pending_statement"]
