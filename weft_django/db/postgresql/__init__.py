"""Every PostgreSQL-specific statement, behind the vendor seam (``db.base.StoreOps``):
``PostgreSQLOps`` here, and the statements it delegates to -- the batch pickup
(``pickup``), the hot claim statements on a server-binding cursor (``prepared``), session and
transaction bounds (``session``), the one-statement start (``start``), the bulk takeover
(``takeover``), the gone engines' look (``presence``) and coalesced batch writes
(``writes``) -- so the rest of weft asks the seam, never the vendor.

Lock order: every statement here that locks several rows locks them in
workflow-id order (claims), then run-id order (runs) -- the global order of
the conditional batch -- so none of them can deadlock with a batch.

The claim statement: a bare claim transition (acquire, takeover, release,
rotation) is one condition on one claim row plus two writes, the claim row
and its ``ClaimEvent``. Through the general executor that is BEGIN, ``SELECT
… FOR UPDATE``, UPDATE, INSERT and COMMIT; here it is one statement with a
data-modifying CTE, atomic on its own::

    WITH c AS (UPDATE claim SET … WHERE workflow_id = %s AND <condition> RETURNING 1)
    INSERT INTO claimevent (…) SELECT … FROM c RETURNING id

The ``WHERE`` *is* the condition: under READ COMMITTED a concurrent writer's
newer row version is re-checked against it (EvalPlanQual), so a lost race
updates nothing, inserts no event, and reads as the condition failing --
the contract of ``conditional_batch``. A condition met by a missing row
(epoch 0, no holder) is an ``INSERT … ON CONFLICT DO UPDATE … WHERE``.
It and the claim read run through ``prepared`` (a server-binding cursor,
prepared when the connection's ``prepare_threshold`` says so).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from operator import attrgetter
from typing import Any, ClassVar

from django.core import checks
from django.db import connections, models

from weft_django.db.base import (
    ClaimRow,
    GoneClaim,
    HolderRow,
    LockedClaim,
    LockedRun,
    StoreOps,
    table,
)
from weft_django.db.postgresql import prepared, presence, start
from weft_django.db.postgresql.pickup import PickupStatements
from weft_django.db.postgresql.session import (
    restore_statement_timeout,
    set_idle_in_transaction_timeout,
    set_local_statement_timeout,
)
from weft_django.db.postgresql.takeover import ClaimPut, bulk_put_claims
from weft_django.models import EngineRecord, WorkflowClaim, WorkflowRun

#: Isolation levels under which the conditional batch's lost races stay results.
PERMITTED_ISOLATION = frozenset({"READ COMMITTED", "READ UNCOMMITTED"})

_HOLDER_COLUMNS = ("engine_id", "expires_at", "claimed_at")


def isolation_name(value: object) -> str:
    """``IsolationLevel.REPEATABLE_READ`` / ``"repeatable read"`` → ``"REPEATABLE READ"``."""
    name = getattr(value, "name", None)
    text = str(name if name is not None else value)
    return text.replace("_", " ").upper()


class PostgreSQLOps(PickupStatements, StoreOps):
    vendor: ClassVar[str] = "postgresql"
    supports_claim_statement: ClassVar[bool] = True
    supports_joint_lock: ClassVar[bool] = True
    supports_listen_notify: ClassVar[bool] = True
    supports_session_presence: ClassVar[bool] = True
    supports_skip_locked: ClassVar[bool] = True
    supports_coalesced_writes: ClassVar[bool] = True
    supports_statement_timeout: ClassVar[bool] = True
    supports_bulk_claim_update: ClassVar[bool] = True
    supports_start_statement: ClassVar[bool] = True

    def __init__(self) -> None:
        # Built once per shape: the claim statement is the protocol's hottest one.
        self._statements: dict[tuple[type[models.Model], bool, tuple[bool, ...] | None], str] = {}
        self._fields: dict[type[models.Model], tuple[tuple[str, str], ...]] = {}
        self._read_sql: dict[str, str] = {}
        self._event_values: dict[type[models.Model], Any] = {}
        self._pickup_sql: dict[tuple[str, str, bool], str] = {}

    def insert_start(
        self, run: WorkflowRun, *, after_finished: bool, notify: tuple[str, str] | None, using: str
    ) -> bool:
        return start.insert_start(run, after_finished=after_finished, notify=notify, using=using)

    # -- the claim statement -------------------------------------------------
    def read_claim(self, using: str, workflow_id: str) -> ClaimRow | None:
        sql = self._read_sql.get(using)
        if sql is None:
            sql = self._read_sql[using] = (
                "SELECT epoch, engine_id, expires_at, claimed_at FROM "
                f"{table(WorkflowClaim, using)} WHERE workflow_id = %s"
            )
        row = prepared.fetchone(using, sql, [workflow_id])
        return None if row is None else (row[0], row[1], row[2], row[3])

    def claim_statement(
        self,
        using: str,
        *,
        workflow_id: str,
        epoch: int,
        holder: tuple[str | None, int | None, int | None] | None,
        new_epoch: int,
        new_holder: tuple[str | None, int | None, int | None],
        upsert: bool,
        event: models.Model,
    ) -> bool:
        model = type(event)
        if upsert:
            params = [workflow_id, new_epoch, *new_holder, epoch]
        else:
            params = [new_epoch, *new_holder, workflow_id, epoch]
        if holder is None:
            null_pattern = None
        else:
            null_pattern = (holder[0] is None, holder[1] is None, holder[2] is None)
            params += [v for v in holder if v is not None]
        getter = self._event_values.get(model)
        if getter is None:
            getter = self._event_values[model] = attrgetter(
                *(name for name, _ in self._event_fields(model))
            )
        params += getter(event)
        sql = self._statement(using, model, upsert, null_pattern)
        row = prepared.fetchone(using, sql, params)
        if row is None:
            return False
        event.pk = row[0]
        event._state.adding = False
        event._state.db = using
        return True

    def _event_fields(self, model: type[models.Model]) -> tuple[tuple[str, str], ...]:
        """``(attname, column)`` of the event model's concrete non-pk fields."""
        fields = self._fields.get(model)
        if fields is None:
            fields = tuple(
                (f.attname, f.column or f.attname)
                for f in model._meta.concrete_fields
                if not f.primary_key
            )
            self._fields[model] = fields
        return fields

    def _statement(
        self,
        using: str,
        model: type[models.Model],
        upsert: bool,
        null_pattern: tuple[bool, ...] | None,
    ) -> str:
        """``null_pattern``: for an exact holder, which of its columns must be
        NULL; ``None`` compares the epoch only."""
        key = (model, upsert, null_pattern)
        sql = self._statements.get(key)
        if sql is not None:
            return sql
        quote = connections[using].ops.quote_name
        holder_sql = ""
        if null_pattern is not None:
            for column, is_null in zip(_HOLDER_COLUMNS, null_pattern, strict=True):
                holder_sql += f" AND t.{column} IS NULL" if is_null else f" AND t.{column} = %s"
        claim_table = table(WorkflowClaim, using)
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
        fields = self._event_fields(model)
        columns = ", ".join(quote(column) for _, column in fields)
        placeholders = ", ".join(["%s"] * len(fields))
        pk = model._meta.pk
        assert pk is not None
        sql = (
            f"WITH c AS ({claim_sql}) INSERT INTO {table(model, using)} ({columns}) "
            f"SELECT {placeholders} FROM c RETURNING {quote(pk.column or pk.attname)}"
        )
        self._statements[key] = sql
        return sql

    # -- the joint lock ------------------------------------------------------
    def lock_claims_and_runs(
        self,
        using: str,
        claim_ids: Sequence[str],
        run_ids: Sequence[str],
        claims: dict[str, Any],
        runs: dict[str, Any],
    ) -> bool:
        """A commit conditions on its claim (the fence) and its run; two
        ``SELECT … FOR UPDATE`` would be two round trips per checkpoint. The
        ``UNION ALL`` reads (and locks) its first branch before the second.

        The runs are locked only when every claim row was (``r`` counts
        ``c``): with a claim row still to create, the caller inserts it and
        locks again, and a run locked before that insert would be held ahead
        of a claim -- against the global order, a deadlock with any batch
        that holds the claim and waits for the run.
        """
        sql = (
            "WITH c AS (SELECT workflow_id, epoch, engine_id, expires_at, claimed_at "
            f"FROM {table(WorkflowClaim, using)} WHERE workflow_id = ANY(%s) "
            "ORDER BY workflow_id FOR UPDATE), "
            f"r AS (SELECT id, version, status, wake_seq FROM {table(WorkflowRun, using)} "
            "WHERE id = ANY(%s::uuid[]) AND (SELECT count(*) FROM c) = %s "
            "ORDER BY id FOR UPDATE) "
            "SELECT 'c', workflow_id, epoch, engine_id, expires_at, claimed_at FROM c "
            "UNION ALL SELECT 'r', id::text, version, status, wake_seq, NULL FROM r"
        )
        with connections[using].cursor() as cursor:
            cursor.execute(sql, [list(claim_ids), list(run_ids), len(set(claim_ids))])
            for kind, key, number, text, second, third in cursor.fetchall():
                if kind == "c":
                    claims[key] = LockedClaim(number, text, second, third)
                else:
                    runs[key] = LockedRun(text, number, second)
        return len(claims) == len(claim_ids)

    def lock_claims_skip_locked(
        self, using: str, workflow_ids: Sequence[str]
    ) -> dict[str, ClaimRow]:
        """A batch pickup's claim rows, ensured and locked in one statement.

        ``ins`` creates the missing rows (locked: this transaction inserted
        them), ``old`` locks the existing ones in workflow-id order and skips
        any row another transaction holds. Both read one snapshot, so no row
        is returned twice.
        """
        claims = table(WorkflowClaim, using)
        columns = "workflow_id, epoch, engine_id, expires_at, claimed_at"
        sql = (
            f"WITH ins AS (INSERT INTO {claims} (workflow_id, epoch) "
            "SELECT w, 0 FROM unnest(%s::text[]) AS u(w) ORDER BY w "
            f"ON CONFLICT DO NOTHING RETURNING {columns}), "
            f"old AS (SELECT {columns} FROM {claims} WHERE workflow_id = ANY(%s) "
            "ORDER BY workflow_id FOR UPDATE SKIP LOCKED) "
            f"SELECT {columns} FROM ins UNION ALL SELECT {columns} FROM old"
        )
        ids = sorted(set(workflow_ids))
        with connections[using].cursor() as cursor:
            cursor.execute(sql, [ids, ids])
            return {w: (e, g, x, c) for w, e, g, x, c in cursor.fetchall()}

    def lock_gone_claims_skip_locked(
        self, using: str, engine_ids: Sequence[str], run_statuses: Sequence[str], limit: int
    ) -> list[GoneClaim]:
        """A bulk takeover's claim rows: ``FOR UPDATE OF c`` locks the claim rows
        only (the run is read, not locked), in workflow-id order -- the global
        order -- and skips any row another transaction holds. One live run per
        workflow id (a unique constraint): at most one row per claim."""
        claims = table(WorkflowClaim, using)
        runs = table(WorkflowRun, using)
        sql = (
            "SELECT c.workflow_id, r.id::text, c.epoch, c.engine_id, c.expires_at, c.claimed_at "
            f"FROM {claims} AS c JOIN {runs} AS r ON r.workflow_id = c.workflow_id "
            "WHERE c.engine_id = ANY(%s) AND r.status = ANY(%s) "
            "ORDER BY c.workflow_id LIMIT %s FOR UPDATE OF c SKIP LOCKED"
        )
        with connections[using].cursor() as cursor:
            cursor.execute(sql, [sorted(set(engine_ids)), sorted(set(run_statuses)), int(limit)])
            return [GoneClaim(w, r, (e, g, x, c)) for w, r, e, g, x, c in cursor.fetchall()]

    # -- renewals ------------------------------------------------------------
    def renew_exact_holders(
        self, using: str, holders: Sequence[HolderRow], new_expires: int
    ) -> set[str]:
        """Rows are locked in workflow-id order first: an ``UPDATE … FROM``
        alone locks in join order, which can deadlock with a batch."""
        claims = table(WorkflowClaim, using)
        sql = (
            "WITH locked AS (SELECT c.workflow_id FROM "
            f"{claims} AS c JOIN jsonb_to_recordset(%s::jsonb) "
            "AS v(w text, e bigint, g text, x bigint, c bigint) "
            "ON c.workflow_id = v.w AND c.epoch = v.e AND c.engine_id = v.g "
            "AND c.expires_at = v.x AND c.claimed_at = v.c "
            "ORDER BY c.workflow_id FOR UPDATE OF c) "
            f"UPDATE {claims} AS c SET expires_at = %s FROM locked "
            "WHERE c.workflow_id = locked.workflow_id RETURNING c.workflow_id"
        )
        payload = json.dumps(
            [
                {"w": wid, "e": epoch, "g": engine_id, "x": expires_at, "c": claimed_at}
                for wid, epoch, engine_id, expires_at, claimed_at in holders
            ]
        )
        with connections[using].cursor() as cursor:
            cursor.execute(sql, [payload, new_expires])
            return {row[0] for row in cursor.fetchall()}

    def renew_engine_rows(
        self,
        using: str,
        engine_id: str,
        new_expires: int,
        *,
        epoch_limit: int,
        timestamp_limit: int,
    ) -> list[tuple[str, int, int]]:
        claims = table(WorkflowClaim, using)
        sql = (
            f"WITH locked AS (SELECT workflow_id FROM {claims} WHERE "
            "engine_id = %s AND epoch >= 1 AND epoch < %s AND expires_at >= 0 "
            "AND expires_at < %s AND claimed_at >= 0 AND claimed_at < %s "
            "ORDER BY workflow_id FOR UPDATE) "
            f"UPDATE {claims} AS c SET expires_at = %s FROM locked "
            "WHERE c.workflow_id = locked.workflow_id "
            "RETURNING c.workflow_id, c.epoch, c.claimed_at"
        )
        params: list[Any] = [engine_id, epoch_limit, timestamp_limit, timestamp_limit, new_expires]
        with connections[using].cursor() as cursor:
            cursor.execute(sql, params)
            return [(r[0], int(r[1]), int(r[2])) for r in cursor.fetchall()]

    # -- server and session --------------------------------------------------
    def gone_engines_sql(self, using: str) -> str:
        """The gone engines' statement (``presence.gone_engines_sql``)."""
        return presence.gone_engines_sql(table(EngineRecord, using))

    def database_clock_ms(self, using: str) -> int | None:
        with connections[using].cursor() as cursor:
            cursor.execute("SELECT (extract(epoch from clock_timestamp()) * 1000)::bigint")
            return int(cursor.fetchone()[0])

    def bound_idle_transactions(self, connection: Any, limit_ms: int) -> bool:
        set_idle_in_transaction_timeout(connection, limit_ms)
        return True

    def set_local_statement_timeout(self, using: str, limit_ms: int) -> str:
        return set_local_statement_timeout(using, limit_ms)

    def restore_statement_timeout(self, using: str, before: str) -> None:
        restore_statement_timeout(using, before)

    # -- bulk takeover ---------------------------------------------------------
    def bulk_put_claims(self, using: str, puts: Sequence[ClaimPut]) -> int:
        return bulk_put_claims(using, puts)

    # -- capability ----------------------------------------------------------
    def capability_problems(
        self, alias: str, entry: Mapping[str, Any], ownership: str
    ) -> list[checks.CheckMessage]:
        """READ COMMITTED (the default): a stricter level turns the lost races
        the batch reports as results into serialization errors."""
        isolation = (entry.get("OPTIONS", {}) or {}).get("isolation_level")
        if isolation is None or isolation_name(isolation) in PERMITTED_ISOLATION:
            return []
        return [
            checks.Error(
                f"PostgreSQL database {alias!r} uses isolation level "
                f"{isolation_name(isolation)}; weft-django's conditional batch needs "
                "READ COMMITTED (a stricter level turns lost races into errors)",
                id="weft.E012",
            )
        ]
