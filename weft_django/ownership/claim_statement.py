"""A claim transition as ONE PostgreSQL statement (the fast path of the batch).

Why: a bare claim transition (acquire, takeover, release, rotation) is one
condition on one claim row plus two writes: the claim row and its
``ClaimEvent``. Run through the general executor it costs BEGIN, ``SELECT …
FOR UPDATE``, UPDATE, INSERT and COMMIT — five round trips, where the bare
CAS a hand-written lock table would do is one. Profiling the claim benchmark
showed those round trips, not Python, were the cost (issue #7).

On PostgreSQL the same check-and-write is one statement with a data-modifying
CTE, atomic on its own:

    WITH c AS (UPDATE claim SET … WHERE workflow_id = %s AND <condition> RETURNING 1)
    INSERT INTO claimevent (…) SELECT … FROM c RETURNING id

The ``WHERE`` *is* the condition: under READ COMMITTED a concurrent writer's
newer row version is re-checked against it (PostgreSQL's EvalPlanQual), so a
lost race updates nothing, inserts no event, and reads as the condition
failing — exactly the contract of ``conditional_batch``. A condition at
epoch 0 with no holder is also met by a missing row (the general executor
ensures the row at epoch 0 first), so that case is an ``INSERT … ON CONFLICT
DO UPDATE … WHERE`` instead.

Only that exact shape is taken; anything else (``owner`` matches, other
conditions, other writes, SQLite) returns ``None`` and goes the general way.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

from django.db import connections

from weft_django.models import ClaimEvent, WorkflowClaim
from weft_django.ownership.batch import (
    ABSENT_HOLDER,
    ClaimCondition,
    Condition,
    Insert,
    PutClaim,
    Write,
)


def try_claim_statement(conds: Sequence[Condition], ops: Sequence[Write], db: str) -> bool | None:
    """Run a bare claim transition as one statement; ``None`` = not that shape.

    Returns whether the condition held (and so both writes were applied).
    """
    connection = connections[db]
    if connection.vendor != "postgresql" or len(conds) != 1 or len(ops) != 2:
        return None
    cond = conds[0]
    if not isinstance(cond, ClaimCondition) or cond.match not in ("exact", "any"):
        return None
    put = next((op for op in ops if isinstance(op, PutClaim)), None)
    event = next((op for op in ops if isinstance(op, Insert)), None)
    if (
        put is None
        or event is None
        or put.workflow_id != cond.workflow_id
        or event.absence is not None
        or type(event.instance) is not ClaimEvent
    ):
        return None

    new_values = [put.epoch, *put.holder]
    upsert = cond.epoch == 0 and (cond.match == "any" or cond.holder == ABSENT_HOLDER)
    null_pattern = None if cond.match == "any" else tuple(v is None for v in cond.holder)
    holder_params = [] if cond.match == "any" else [v for v in cond.holder if v is not None]
    sql = _statement(upsert, null_pattern)
    if upsert:
        claim_params = [cond.workflow_id, *new_values, cond.epoch, *holder_params]
    else:
        claim_params = [*new_values, cond.workflow_id, cond.epoch, *holder_params]
    event_params = [getattr(event.instance, name) for name, _ in _event_fields()]
    with connection.cursor() as cursor:
        cursor.execute(sql, [*claim_params, *event_params])
        row = cursor.fetchone()
    if row is None:
        return False
    event.instance.pk = row[0]
    event.instance._state.adding = False
    event.instance._state.db = db
    return True


@functools.cache
def _event_fields() -> tuple[tuple[str, str], ...]:
    """``(attname, column)`` of ``ClaimEvent``'s concrete non-pk fields, in order."""
    return tuple(
        (f.attname, f.column or f.attname)
        for f in ClaimEvent._meta.concrete_fields
        if not f.primary_key
    )


@functools.cache
def _statement(upsert: bool, null_pattern: tuple[bool, ...] | None) -> str:
    """The statement's SQL for one shape (built once: building it showed in the profile).

    ``upsert``: the condition is met by a missing row (epoch 0, no holder).
    ``null_pattern``: for an ``exact`` holder, which of (engine_id, expires_at,
    claimed_at) must be NULL; ``None`` for ``any`` (epoch only).
    """
    holder_sql = ""
    if null_pattern is not None:
        for column, is_null in zip(
            ("engine_id", "expires_at", "claimed_at"), null_pattern, strict=True
        ):
            holder_sql += f" AND t.{column} IS NULL" if is_null else f" AND t.{column} = %s"
    claim_table = WorkflowClaim._meta.db_table  # unquoted, as in the registry's raw SQL
    if upsert:
        claim_sql = (
            f"INSERT INTO {claim_table} AS t "
            "(workflow_id, epoch, engine_id, expires_at, claimed_at) "
            "VALUES (%s, %s, %s, %s, %s) ON CONFLICT (workflow_id) DO UPDATE SET "
            "epoch = EXCLUDED.epoch, engine_id = EXCLUDED.engine_id, "
            "expires_at = EXCLUDED.expires_at, claimed_at = EXCLUDED.claimed_at "
            f"WHERE t.epoch = %s{holder_sql} RETURNING 1"
        )
    else:
        claim_sql = (
            f"UPDATE {claim_table} AS t SET epoch = %s, engine_id = %s, "
            "expires_at = %s, claimed_at = %s "
            f"WHERE t.workflow_id = %s AND t.epoch = %s{holder_sql} RETURNING 1"
        )
    columns = ", ".join(column for _, column in _event_fields())
    placeholders = ", ".join(["%s"] * len(_event_fields()))
    event_table = ClaimEvent._meta.db_table
    return (
        f"WITH c AS ({claim_sql}) INSERT INTO {event_table} ({columns}) "
        f"SELECT {placeholders} FROM c RETURNING id"
    )
