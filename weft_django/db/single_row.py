"""Single-row writes of a turn without the ORM's query compiler.

Why: every checkpoint of a turn updates its run row (``version + 1``,
status, timestamps, results) and inserts journal entries. Through the ORM,
building, cloning and compiling a query for what is always the same
single-row statement is a large share of an engine's CPU. These build that
statement directly, with each field's own
``pre_save``/``get_db_prep_save`` (so JSON, UUID and datetime values are
adapted exactly as the ORM would).

``update_by_pk``: a filter on the primary key alone, concrete non-relation
fields, plain values or ``F(same field) + int`` (``col = col + n``); like
``QuerySet.update``, no ``save()`` hooks or ``auto_now``.

``insert_row``: only weft's own append-only rows (journal entries, claim
events, timers, activity attempts), and only while nobody listens to their ``pre_save`` /
``post_save`` signals — a project that does gets the ORM and its signals.

Anything else returns ``False`` and the caller uses the ORM.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import FieldDoesNotExist
from django.db import connections, models
from django.db.models import signals
from django.db.models.expressions import CombinedExpression, F, Value

from weft_django.models import ActivityAttempt, ClaimEvent, JournalEntry, Timer

#: weft's own append-only rows, the only ones ``insert_row`` writes.
APPEND_ONLY_MODELS: tuple[type[models.Model], ...] = (
    JournalEntry,
    ClaimEvent,
    Timer,
    ActivityAttempt,
)


def update_by_pk(
    model: type[models.Model], filters: dict[str, Any], values: dict[str, Any], using: str
) -> bool:
    """Apply ``values`` to the row ``filters["pk"]``; ``False`` = not this shape."""
    if set(filters) != {"pk"}:
        return False
    built = update_assignments(model, values, using)
    if built is None:
        return False
    set_sql, params = built
    connection = connections[using]
    quote = connection.ops.quote_name
    pk = model._meta.pk
    assert pk is not None
    params.append(pk.get_db_prep_value(pk.to_python(filters["pk"]), connection))
    sql = (
        f"UPDATE {quote(model._meta.db_table)} SET {set_sql} "
        f"WHERE {quote(pk.column or pk.attname)} = %s"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
    return True


def update_assignments(
    model: type[models.Model], values: dict[str, Any], using: str
) -> tuple[str, list[Any]] | None:
    """``SET`` clause and its parameters for ``values`` (concrete non-relation,
    non-key fields; plain values or ``F(same field) + int``); ``None`` = a
    value this cannot write (use the ORM). Shared with the grouped writes of
    ``db.write_statements``."""
    if not values:
        return None
    connection = connections[using]
    quote = connection.ops.quote_name
    assignments: list[str] = []
    params: list[Any] = []
    for name, value in values.items():
        try:
            field = model._meta.get_field(name)
        except FieldDoesNotExist:
            return None
        if not isinstance(field, models.Field) or field.is_relation or field.primary_key:
            return None
        if not field.concrete or field.column is None:
            return None
        column = quote(field.column)
        increment = _increment(value, field.name)
        if increment is not None:
            assignments.append(f"{column} = {column} + %s")
            params.append(increment)
        elif hasattr(value, "resolve_expression"):
            return None
        else:
            assignments.append(f"{column} = %s")
            params.append(field.get_db_prep_save(value, connection))
    return ", ".join(assignments), params


def _increment(value: Any, field_name: str) -> int | None:
    """``n`` when ``value`` is ``F(field_name) + n`` (an int), else ``None``."""
    if not isinstance(value, CombinedExpression) or value.connector != "+":
        return None
    lhs, rhs = value.lhs, value.rhs
    if not (isinstance(lhs, F) and getattr(lhs, "name", None) == field_name):
        return None
    if not isinstance(rhs, Value):
        return None
    amount = rhs.value
    return amount if isinstance(amount, int) and not isinstance(amount, bool) else None


def insert_row(instance: models.Model, using: str) -> bool:
    """``INSERT`` one weft row (``RETURNING`` its new key); ``False`` = use the ORM."""
    model = type(instance)
    if model not in APPEND_ONLY_MODELS:
        return False
    if signals.pre_save.has_listeners(model) or signals.post_save.has_listeners(model):
        return False
    connection = connections[using]
    if not connection.features.can_return_columns_from_insert:
        return False
    pk = model._meta.pk
    assert pk is not None
    quote = connection.ops.quote_name
    auto_key = isinstance(pk, models.AutoField) and instance.pk is None
    fields = [f for f in model._meta.concrete_fields if not (auto_key and f is pk)]
    columns = ", ".join(quote(f.column or f.attname) for f in fields)
    params = [f.get_db_prep_save(f.pre_save(instance, add=True), connection) for f in fields]
    sql = (
        f"INSERT INTO {quote(model._meta.db_table)} ({columns}) "
        f"VALUES ({', '.join(['%s'] * len(fields))}) RETURNING {quote(pk.column or pk.attname)}"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
    if auto_key and row is not None:
        instance.pk = pk.to_python(row[0])
    instance._state.adding = False
    instance._state.db = using
    return True
