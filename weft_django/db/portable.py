"""Statements that run on every supported database but are not ORM calls.

Invariant: these are the only hand-written statements outside the vendor
modules, and each is portable SQL built from the models' own table and
column names (quoted by the connection), so no caller outside ``db/`` holds
SQL or branches on a vendor.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from django.db import connections
from django.db.models import QuerySet

from weft_django.models import MetricTotals, QueueSlot


def first_values(using: str, querysets: Sequence[QuerySet[Any]]) -> list[Any]:
    """The first value of each single-column, ``LIMIT 1`` queryset, in ONE
    ``SELECT (q1), (q2), …`` (each ``None`` when its queryset is empty)."""
    connection = connections[using]
    parts = [qs.query.get_compiler(connection=connection).as_sql() for qs in querysets]
    sql = "SELECT " + ", ".join(f"({part_sql})" for part_sql, _ in parts)
    with connection.cursor() as cursor:
        cursor.execute(sql, [p for _, part_params in parts for p in part_params])
        return list(cursor.fetchone())


def copy_live_slots(using: str, moves: Sequence[tuple[str, int, int]], at_ms: int) -> None:
    """For each ``(workflow_id, old_epoch, new_epoch)``: a copy, at the new epoch,
    of the old generation's unreleased run slots (no position), as ONE
    ``INSERT … SELECT … UNION ALL``."""
    if not moves:
        return
    connection = connections[using]
    quote = connection.ops.quote_name
    meta = QueueSlot._meta
    col = {f.name: quote(f.column or f.attname) for f in meta.concrete_fields}
    table = quote(meta.db_table)
    select = (
        f"SELECT {col['queue']}, {col['workflow_id']}, CAST(%s AS BIGINT), {col['run_id']}, "
        f"{col['concurrency_key']}, CAST(NULL AS INTEGER), CAST(%s AS BIGINT), %s, %s "
        f"FROM {table} "
        f"WHERE {col['workflow_id']} = %s AND {col['epoch']} = %s "
        f"AND {col['position']} IS NULL AND {col['released']} = %s"
    )
    params: list[Any] = []
    for workflow_id, old, new in moves:
        params += [new, at_ms, False, False, workflow_id, old, False]
    names = (
        "queue",
        "workflow_id",
        "epoch",
        "run_id",
        "concurrency_key",
        "position",
        "admitted_at",
        "released",
        "counts_for_rate",
    )
    columns = ", ".join(col[n] for n in names)
    sql = f"INSERT INTO {table} ({columns}) " + " UNION ALL ".join([select] * len(moves))
    with connection.cursor() as cursor:
        cursor.execute(sql, params)


def read_totals_for_share(using: str, pk: int) -> Any:
    """The folded metric totals' JSON (``None`` when the row is absent), the row
    held ``FOR SHARE`` until commit where the database can lock rows."""
    connection = connections[using]
    suffix = " FOR SHARE" if connection.features.has_select_for_update else ""
    quoted = connection.ops.quote_name(MetricTotals._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT metrics FROM {quoted} WHERE id = %s{suffix}", [pk])
        row = cursor.fetchone()
    if row is None:
        return None
    raw = row[0]
    if isinstance(raw, str):  # SQLite hands JSON back as text on a raw cursor
        try:
            return json.loads(raw)
        except ValueError:
            return None
    return raw
