"""A start in ONE statement on PostgreSQL: the read, the insert and the NOTIFY.

``WITH … INSERT … SELECT … WHERE NOT EXISTS … ON CONFLICT DO NOTHING`` does
the start when nothing stands in its way, and ``pg_notify`` in the same
statement queues the wake, which PostgreSQL delivers only when the
transaction commits (the statement's own, or the caller's: a rolled-back
start wakes nobody).

Invariants, the batch path's (``engine.operations.start``): at most one live
run per workflow id (the partial unique constraint; a concurrent start makes
the insert do nothing), and no start after a finished run unless
``after_finished``. When the statement inserts nothing, the caller takes the
batch path, which reads again and raises what stands in the way. Reached as
``ops(alias).insert_start`` (``supports_start_statement``).
"""

from __future__ import annotations

from typing import Any

from django.db import connections, models

from weft_django.models import TERMINAL_STATUSES, WorkflowRun


def insert_start(
    run: WorkflowRun, *, after_finished: bool, notify: tuple[str, str] | None, using: str
) -> bool:
    """Insert ``run`` unless the workflow's newest run is live (or finished,
    unless ``after_finished``), sending ``notify`` = ``(channel, payload)``
    with it; ``True`` when inserted."""
    connection = connections[using]
    quote = connection.ops.quote_name
    meta = WorkflowRun._meta
    table = quote(meta.db_table)
    fields = list(meta.concrete_fields)
    columns = ", ".join(quote(f.column or f.attname) for f in fields)
    values = ", ".join(f"CAST(%s AS {f.db_type(connection)})" for f in fields)
    params: list[Any] = [run.workflow_id]
    params += [f.get_db_prep_save(f.pre_save(run, add=True), connection) for f in fields]
    terminal = ", ".join(["%s"] * len(TERMINAL_STATUSES))
    params += [*sorted(TERMINAL_STATUSES), after_finished]
    col = {name: quote(_column(name)) for name in ("workflow_id", "created_at", "status", "id")}
    note = "SELECT 0 WHERE false"
    if notify is not None:
        note = "SELECT pg_notify(%s, %s) FROM ins"
        params += list(notify)
    sql = (
        f"WITH prev AS (SELECT {col['status']} AS status FROM {table} "
        f"WHERE {col['workflow_id']} = %s "
        f"ORDER BY {col['created_at']} DESC, {col['id']} DESC LIMIT 1), "
        f"ins AS (INSERT INTO {table} ({columns}) SELECT {values} "
        f"WHERE NOT EXISTS (SELECT 1 FROM prev WHERE status NOT IN ({terminal}) OR NOT %s) "
        f"ON CONFLICT DO NOTHING RETURNING {col['id']}), "
        f"note AS ({note}) "
        "SELECT (SELECT count(*) FROM ins), (SELECT count(*) FROM note)"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        inserted, _ = cursor.fetchone()
    if inserted:
        run._state.adding = False
        run._state.db = using
    return bool(inserted)


def _column(name: str) -> str:
    field = WorkflowRun._meta.get_field(name)
    assert isinstance(field, models.Field)
    return field.column or field.attname


__all__ = ["insert_start"]
