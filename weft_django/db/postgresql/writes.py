"""A batch's writes as few statements as possible (PostgreSQL).

Why: the writes of a conditional batch are checked (its rows locked and
compared) before any of them runs, so what follows the check is a fixed list
of single-row statements -- a pickup of N runs was 3 × N of them, a turn's
checkpoint a journal insert and a run update. Each statement is a round trip
and, on the client, a pass through Django's cursor and psycopg's binding:
most of an engine's CPU. Here the same rows are written by fewer statements:

- ``insert_statement``: the rows of one append-only model in one multi-row
  ``INSERT … RETURNING`` (their new keys come back in ``VALUES`` order, as
  Django's own ``bulk_create`` relies on);
- ``update_statement``: one set of values on many rows of one model by key,
  ``WHERE pk = ANY(%s)``;
- ``delete_statement``: a timer delete by equal columns (``run_id``,
  ``position``, ``kind``) -- a turn's settle removes the command's timers;
- ``claim_put_statement``: claim rows' epoch and holder columns, each row its
  own values, ``UPDATE … FROM (VALUES …)``;
- ``execute``: statements on *distinct* tables as ONE statement of
  data-modifying CTEs. PostgreSQL runs every data-modifying CTE exactly once
  and to completion whether or not the outer query reads it; they share one
  snapshot, which is why two statements on the same table are never merged
  (one could not see the other's rows).

Nothing here decides *whether* to write: the batch's conditions were checked
under lock in the same transaction before (``ownership.batch``). Anything not
of these shapes returns ``None`` and the caller writes it as before.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from django.db import connections, models
from django.db.models import signals

from weft_django.db.single_row import APPEND_ONLY_MODELS
from weft_django.models import Timer, WorkflowClaim, WorkflowRun


@dataclass
class Statement:
    """One data-modifying statement with ``RETURNING``, on one table."""

    table: str
    sql: str
    params: list[Any]
    #: Instances whose new auto key is the statement's returned column, in order.
    keyed: list[models.Model] = field(default_factory=list)
    using: str = "default"

    def assign_keys(self, keys: Sequence[Any]) -> None:
        """Give each inserted instance its key (``keys`` in ``VALUES`` order)."""
        for instance, key in zip(self.keyed, keys, strict=True):
            pk = type(instance)._meta.pk
            assert pk is not None
            instance.pk = pk.to_python(key)
            instance._state.adding = False
            instance._state.db = self.using


def insert_statement(
    instances: Sequence[models.Model], using: str, gate: str | None = None
) -> Statement | None:
    """One ``INSERT`` of weft's append-only rows of one model; ``None`` = not this shape
    (another model, a listener on its save signals, or a database without ``RETURNING``).

    ``gate``: a SQL condition; the rows are inserted only where it holds
    (``INSERT … SELECT`` from typed ``VALUES``)."""
    if not instances:
        return None
    model = type(instances[0])
    if model not in APPEND_ONLY_MODELS or any(type(i) is not model for i in instances):
        return None
    if signals.pre_save.has_listeners(model) or signals.post_save.has_listeners(model):
        return None
    connection = connections[using]
    if not connection.features.can_return_columns_from_insert:
        return None
    pk = model._meta.pk
    assert pk is not None
    if not isinstance(pk, models.AutoField) or any(i.pk is not None for i in instances):
        return None
    quote = connection.ops.quote_name
    fields = [f for f in model._meta.concrete_fields if f is not pk]
    columns = ", ".join(quote(f.column or f.attname) for f in fields)
    if gate is None:
        row = f"({', '.join(['%s'] * len(fields))})"
    else:  # typed: a column of NULLs in VALUES would otherwise be text
        row = f"({', '.join(f'%s::{cast_type(f, connection)}' for f in fields)})"
    params = [
        f.get_db_prep_save(f.pre_save(instance, add=True), connection)
        for instance in instances
        for f in fields
    ]
    table = quote(model._meta.db_table)
    rows = ", ".join([row] * len(instances))
    returning = f"RETURNING {quote(pk.column or pk.attname)}"
    if gate is None:
        sql = f"INSERT INTO {table} ({columns}) VALUES {rows} {returning}"
    else:
        sql = (
            f"INSERT INTO {table} ({columns}) SELECT * FROM (VALUES {rows}) AS v "
            f"WHERE {gate} {returning}"
        )
    return Statement(table, sql, params, keyed=list(instances), using=using)


def cast_type(field_: models.Field[Any, Any], connection: Any) -> str:
    """The type to cast a parameter of ``field_`` to: its column's type, with
    character types unbounded (an explicit cast to ``varchar(n)`` would
    truncate; the assignment to the column still checks the length)."""
    name = str(field_.cast_db_type(connection))
    return "text" if name.startswith(("varchar", "char", "character")) else name


def update_statement(
    model: type[models.Model],
    pks: Sequence[Any],
    assignments: tuple[str, list[Any]],
    using: str,
    gate: str | None = None,
) -> Statement:
    """The same ``SET`` on the rows ``pks`` of ``model`` (where ``gate`` holds)."""
    connection = connections[using]
    quote = connection.ops.quote_name
    pk = model._meta.pk
    assert pk is not None
    keys = [pk.get_db_prep_value(pk.to_python(value), connection) for value in pks]
    column = quote(pk.column or pk.attname)
    set_sql, params = assignments
    table = quote(model._meta.db_table)
    if len(keys) == 1:
        where, key_params = f"{column} = %s", keys
    else:
        where, key_params = f"{column} = ANY(%s)", [keys]
    if gate is not None:
        where = f"{where} AND {gate}"
    sql = f"UPDATE {table} SET {set_sql} WHERE {where} RETURNING 1"
    return Statement(table, sql, [*params, *key_params], using=using)


#: Rows a ``DELETE`` may remove inside a coalesced batch: nothing refers to
#: them (no cascade to run) and weft never listens to their delete signals.
DELETABLE_MODELS: tuple[type[models.Model], ...] = (Timer,)


def delete_statement(
    model: type[models.Model], filters: dict[str, Any], using: str, gate: str | None = None
) -> Statement | None:
    """``DELETE`` the rows of ``model`` whose columns equal ``filters`` (where
    ``gate`` holds); ``None`` = not this shape (another model, a lookup other
    than equality, a ``None`` value, a listener on its delete signals)."""
    if model not in DELETABLE_MODELS or not filters:
        return None
    if signals.pre_delete.has_listeners(model) or signals.post_delete.has_listeners(model):
        return None
    connection = connections[using]
    quote = connection.ops.quote_name
    where: list[str] = []
    params: list[Any] = []
    for name, value in filters.items():
        try:
            column = model._meta.get_field(name)
        except Exception:  # a lookup (``pk__in``) or an unknown name
            return None
        if (
            value is None
            or not isinstance(column, models.Field)
            or not column.column
            or (column.is_relation and name != column.attname)
        ):
            return None
        where.append(f"{quote(column.column)} = %s")
        params.append(column.get_db_prep_value(value, connection))
    if gate is not None:
        where.append(gate)
    sql = f"DELETE FROM {quote(model._meta.db_table)} WHERE {' AND '.join(where)} RETURNING 1"
    return Statement(quote(model._meta.db_table), sql, params, using=using)


#: The claim columns a ``PutClaim`` writes, after the key.
_CLAIM_COLUMNS = ("epoch", "engine_id", "expires_at", "claimed_at")


def claim_put_statement(
    rows: Sequence[tuple[str, int, str | None, int | None, int | None]],
    using: str,
    gate: str | None = None,
) -> Statement:
    """Each claim row ``(workflow_id, epoch, engine_id, expires_at, claimed_at)``
    set to its own values (the holder columns ``None`` = no holder; only where
    ``gate`` holds)."""
    connection = connections[using]
    quote = connection.ops.quote_name
    meta = WorkflowClaim._meta
    table = quote(meta.db_table)
    fields = {name: _concrete(name) for name in ("workflow_id", *_CLAIM_COLUMNS)}
    key = quote(fields["workflow_id"].column or "workflow_id")
    if len(rows) == 1:
        sets = ", ".join(f"{quote(fields[c].column or c)} = %s" for c in _CLAIM_COLUMNS)
        workflow_id, *values = rows[0]
        where = f"{key} = %s" if gate is None else f"{key} = %s AND {gate}"
        sql = f"UPDATE {table} SET {sets} WHERE {where} RETURNING 1"
        return Statement(table, sql, [*values, workflow_id], using=using)
    names = ("workflow_id", *_CLAIM_COLUMNS)
    # Typed placeholders: a column of NULLs in VALUES would otherwise be text.
    casts = [f"%s::{cast_type(fields[n], connection)}" for n in names]
    row = f"({', '.join(casts)})"
    sets = ", ".join(f"{quote(fields[c].column or c)} = v.{c}" for c in _CLAIM_COLUMNS)
    sql = (
        f"UPDATE {table} AS t SET {sets} FROM (VALUES {', '.join([row] * len(rows))}) "
        f"AS v({', '.join(names)}) WHERE t.{key} = v.workflow_id"
        f"{'' if gate is None else f' AND {gate}'} RETURNING 1"
    )
    return Statement(table, sql, [value for r in rows for value in r], using=using)


def _concrete(name: str) -> models.Field[Any, Any]:
    """A concrete column of ``WorkflowClaim``."""
    field_ = WorkflowClaim._meta.get_field(name)
    assert isinstance(field_, models.Field)
    return field_


def execute(statements: Sequence[Statement], using: str) -> None:
    """Run ``statements`` in order: as one statement of CTEs when each is on
    its own table, else one by one. Inserted instances get their keys."""
    if not statements:
        return
    connection = connections[using]
    tables = [s.table for s in statements]
    with connection.cursor() as cursor:
        if len(statements) == 1 or len(set(tables)) < len(tables):
            for statement in statements:
                cursor.execute(statement.sql, statement.params)
                if statement.keyed:
                    statement.assign_keys([row[0] for row in cursor.fetchall()])
            return
        ctes = ", ".join(f"w{i} AS ({s.sql})" for i, s in enumerate(statements))
        # Each CTE's returned column, as an array; keys in insertion order.
        outs = ", ".join(_out(i, s) for i, s in enumerate(statements))
        cursor.execute(f"WITH {ctes} SELECT {outs}", [p for s in statements for p in s.params])
        row = cursor.fetchone()
    for statement, out in zip(statements, row, strict=True):
        if statement.keyed:
            statement.assign_keys(out)


#: The condition each write of a checked statement carries: the ``ok`` CTE
#: found every condition row, locked, with the values the caller read.
GATE = "EXISTS (SELECT 1 FROM ok)"


@dataclass(frozen=True)
class ClaimPredicate:
    """A claim row's condition, as SQL can state it: ``epoch`` and the holder
    (``exact``: the three columns; ``owner``: held by ``holder[0]`` with
    timestamps in ``[0, max_timestamp)``; ``any``: the epoch alone)."""

    workflow_id: str
    epoch: int
    match: str
    holder: tuple[str | None, int | None, int | None]
    max_timestamp: int


@dataclass(frozen=True)
class RunPredicate:
    """A run row's condition: a status among ``statuses``, ``version``, ``wake_seq``."""

    run_id: str
    statuses: tuple[str, ...] | None = None
    version: int | None = None
    wake_seq: int | None = None


def execute_checked(
    using: str,
    claims: Sequence[ClaimPredicate],
    runs: Sequence[RunPredicate],
    statements: Sequence[Statement],
) -> bool:
    """Lock the condition rows, check them and write -- one statement, atomic.

    ``statements`` carry ``GATE`` and are on distinct tables. The claim rows
    are locked first (workflow-id order), then the runs (id order), and only
    then can a write run (each write's ``GATE`` is a one-time filter on
    ``ok``): the batch's global lock order. A row whose newest version no
    longer matches (a concurrent commit, re-checked by ``FOR UPDATE``) is
    not counted, ``ok`` is empty, nothing is written: ``False``. The caller
    then runs the general batch, which says which condition failed.
    """
    connection = connections[using]
    quote = connection.ops.quote_name
    ctes: list[str] = []
    params: list[Any] = []
    checks: list[str] = []
    # Several conditions on one row: the row must meet all of them.
    if claims:
        by_claim: dict[str, list[str]] = {}
        for claim in claims:
            by_claim.setdefault(claim.workflow_id, []).append(_claim_predicate(claim, params))
        ctes.append(_locked("c", quote(WorkflowClaim._meta.db_table), "workflow_id", by_claim))
        checks.append(f"(SELECT count(*) FROM c) = {len(by_claim)}")
    if runs:
        by_run: dict[str, list[str]] = {}
        for run in runs:
            by_run.setdefault(run.run_id, []).append(_run_predicate(run, params))
        ctes.append(_locked("r", quote(WorkflowRun._meta.db_table), "id", by_run))
        checks.append(f"(SELECT count(*) FROM r) = {len(by_run)}")
    ctes.append(f"ok AS (SELECT 1 WHERE {' AND '.join(checks) or 'TRUE'})")
    outs = ["(SELECT count(*) FROM ok)"]
    for i, statement in enumerate(statements):
        ctes.append(f"w{i} AS ({statement.sql})")
        params += statement.params
        outs.append(_out(i, statement))
    with connection.cursor() as cursor:
        cursor.execute(f"WITH {', '.join(ctes)} SELECT {', '.join(outs)}", params)
        row = cursor.fetchone()
    if row is None or not row[0]:
        return False
    for statement, out in zip(statements, row[1:], strict=True):
        if statement.keyed:
            statement.assign_keys(out)
    return True


def _locked(name: str, table: str, key: str, predicates: dict[str, list[str]]) -> str:
    """The CTE ``name`` locking, in ``key`` order, each row that meets all of its predicates."""
    where = " OR ".join(" AND ".join(each) for each in predicates.values())
    return f"{name} AS (SELECT {key} FROM {table} WHERE ({where}) ORDER BY {key} FOR UPDATE)"


def _claim_predicate(claim: ClaimPredicate, params: list[Any]) -> str:
    params += [claim.workflow_id, claim.epoch]
    sql = "(workflow_id = %s AND epoch = %s"
    if claim.match == "exact":
        params += list(claim.holder)
        sql += (
            " AND engine_id IS NOT DISTINCT FROM %s::text"
            " AND expires_at IS NOT DISTINCT FROM %s::bigint"
            " AND claimed_at IS NOT DISTINCT FROM %s::bigint"
        )
    elif claim.match == "owner":
        params += [claim.holder[0], claim.max_timestamp, claim.max_timestamp]
        sql += (
            " AND engine_id = %s AND expires_at >= 0 AND expires_at < %s"
            " AND claimed_at >= 0 AND claimed_at < %s"
        )
    elif claim.match != "any":
        raise ValueError(f"execute_checked: unknown claim match {claim.match!r}")
    return sql + ")"


def _run_predicate(run: RunPredicate, params: list[Any]) -> str:
    params.append(run.run_id)
    sql = "(id = %s::uuid"
    if run.statuses is not None:
        params.append(list(run.statuses))
        sql += " AND status = ANY(%s)"
    if run.version is not None:
        params.append(run.version)
        sql += " AND version = %s"
    if run.wake_seq is not None:
        params.append(run.wake_seq)
        sql += " AND wake_seq = %s"
    return sql + ")"


def _out(i: int, statement: Statement) -> str:
    """What the outer query reads of the write ``w{i}``: its keys, or its count."""
    if statement.keyed:
        column = _returned(statement)
        return f"(SELECT array_agg(w{i}.{column} ORDER BY w{i}.{column}) FROM w{i})"
    return f"(SELECT count(*) FROM w{i})"


def _returned(statement: Statement) -> str:
    """The column a keyed statement returns (the model's auto key)."""
    pk = type(statement.keyed[0])._meta.pk
    assert pk is not None
    return connections[statement.using].ops.quote_name(pk.column or pk.attname)


__all__ = [
    "DELETABLE_MODELS",
    "GATE",
    "ClaimPredicate",
    "RunPredicate",
    "Statement",
    "claim_put_statement",
    "delete_statement",
    "execute",
    "execute_checked",
    "insert_statement",
    "update_statement",
]
