"""The stored (encoded) form of payload columns, read and swapped by hand.

Why hand-written: rewriting a payload under the current key must compare the
row against exactly what was read -- the envelope, not the decoded value
(which would read the same before and after a concurrent rewrite). So
``scan`` reads the column's stored JSON text (no ``from_db_value``) and
``swap`` writes the new envelope only ``WHERE`` the column still holds the
text it read: a row changed since (a live owner's write) is left alone and
the caller reads it again.
"""

from __future__ import annotations

import json
from typing import Any

from django.db import connections, models


def _raw(model: type[models.Model], column: str, using: str) -> str:
    """The quoted column of field ``column``."""
    field = model._meta.get_field(column)
    return str(connections[using].ops.quote_name(str(getattr(field, "column", column))))


def _column_sql(model: type[models.Model], column: str, using: str) -> tuple[str, str, str]:
    connection = connections[using]
    quote = connection.ops.quote_name
    text = _raw(model, column, using)
    if connection.vendor == "postgresql":
        text = f"{text}::text"
    pk = model._meta.pk
    assert pk is not None
    return quote(model._meta.db_table), quote(str(pk.column)), text


def scan(
    model: type[models.Model], column: str, after: Any, limit: int, using: str
) -> list[tuple[Any, str]]:
    """Up to ``limit`` rows ``(pk, stored JSON text)`` with a non-null column,
    in primary-key order after ``after`` (``None``: from the start)."""
    table, pk, text = _column_sql(model, column, using)
    raw = _raw(model, column, using)
    sql = f"SELECT {pk}, {text} FROM {table} WHERE {raw} IS NOT NULL"
    params: list[Any] = []
    if after is not None:
        sql += f" AND {pk} > %s"
        params.append(_pk_param(model, after, using))
    sql += f" ORDER BY {pk} LIMIT %s"
    params.append(limit)
    with connections[using].cursor() as cursor:
        cursor.execute(sql, params)
        return [(row[0], row[1]) for row in cursor.fetchall()]


def read(model: type[models.Model], column: str, pk: Any, using: str) -> str | None:
    """The stored JSON text of row ``pk``'s column (``None``: no row, or SQL NULL)."""
    table, pk_column, text = _column_sql(model, column, using)
    with connections[using].cursor() as cursor:
        cursor.execute(
            f"SELECT {text} FROM {table} WHERE {pk_column} = %s", [_pk_param(model, pk, using)]
        )
        row = cursor.fetchone()
    return None if row is None else row[0]


def swap(
    model: type[models.Model], column: str, pk: Any, old_text: str, new: Any, using: str
) -> bool:
    """Store ``new`` (an envelope, already encoded) in the row ``pk`` if its column
    still holds ``old_text``; whether it did."""
    connection = connections[using]
    table, pk_column, _text = _column_sql(model, column, using)
    raw = _raw(model, column, using)
    dumped = json.dumps(new)
    if connection.vendor == "postgresql":
        sql = f"UPDATE {table} SET {raw} = %s::jsonb WHERE {pk_column} = %s AND {raw} = %s::jsonb"
    else:
        sql = f"UPDATE {table} SET {raw} = %s WHERE {pk_column} = %s AND {raw} = %s"
    with connection.cursor() as cursor:
        cursor.execute(sql, [dumped, _pk_param(model, pk, using), old_text])
        return bool(cursor.rowcount == 1)


def _pk_param(model: type[models.Model], value: Any, using: str) -> Any:
    pk = model._meta.pk
    assert pk is not None
    return pk.get_db_prep_value(pk.to_python(value), connections[using])


__all__ = ["read", "scan", "swap"]
