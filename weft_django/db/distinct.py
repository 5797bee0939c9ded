"""The distinct values of an indexed column, read in index order (a "loose index scan").

Why: ``SELECT DISTINCT name FROM runs`` (what the admin's value filters ask)
reads every row, so the run list got slower with every run ever started. A
recursive query that asks the index for the next value after the last one
costs one index descent per distinct value instead: a handful of workflow
names or queues among a million runs is a handful of lookups. PostgreSQL
and SQLite both run it. ``limit`` bounds the values returned (a filter
sidebar of thousands of values is no filter).
"""

from __future__ import annotations

from typing import Any

from django.db import connections
from django.db.models import Model

from weft_django.db.counting import column_name

#: Values a filter lists at most.
DISTINCT_LIMIT = 200


def distinct_values(
    model: type[Model], column: str, using: str, limit: int = DISTINCT_LIMIT
) -> list[Any]:
    """``column``'s distinct non-NULL values in order (at most ``limit``), then
    ``None`` when some row has NULL there."""
    if limit < 1:
        raise ValueError(f"limit must be >= 1, got {limit!r}")
    connection = connections[using]
    quote = connection.ops.quote_name
    table = quote(model._meta.db_table)
    col = quote(column_name(model, column))
    sql = (
        f"WITH RECURSIVE vals(v, n) AS ("
        f"SELECT (SELECT {col} FROM {table} WHERE {col} IS NOT NULL ORDER BY {col} LIMIT 1), 1 "
        f"UNION ALL "
        f"SELECT (SELECT {col} FROM {table} WHERE {col} > vals.v ORDER BY {col} LIMIT 1), n + 1 "
        f"FROM vals WHERE vals.v IS NOT NULL AND n < %s"
        f") SELECT v FROM vals WHERE v IS NOT NULL"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [limit])
        values: list[Any] = [row[0] for row in cursor.fetchall()]
        cursor.execute(f"SELECT 1 FROM {table} WHERE {col} IS NULL LIMIT 1")
        if cursor.fetchone() is not None:
            values.append(None)
    return values


__all__ = ["DISTINCT_LIMIT", "distinct_values"]
