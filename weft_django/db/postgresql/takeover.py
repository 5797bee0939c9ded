"""A bulk takeover's claim writes as one statement (PostgreSQL).

Invariant: each row is written only at the epoch its condition read (the
fence, repeated in the statement's own ``WHERE``); the caller compares the
row count with the number of rows and fails the whole batch when short.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db import connections, models

from weft_django.models import WorkflowClaim

#: ``(workflow_id, read_epoch, epoch, engine_id, expires_at, claimed_at)``
ClaimPut = tuple[str, int, int, str | None, int | None, int | None]

CLAIM_COLUMNS = ("workflow_id", "epoch", "engine_id", "expires_at", "claimed_at")


def _column(name: str) -> str:
    field = WorkflowClaim._meta.get_field(name)
    assert isinstance(field, models.Field)
    return field.column or field.attname


def bulk_put_claims(using: str, puts: Sequence[ClaimPut]) -> int:
    """``UPDATE … FROM (VALUES …)`` of every put; returns the rows written."""
    connection = connections[using]
    quote = connection.ops.quote_name
    col = {name: quote(_column(name)) for name in CLAIM_COLUMNS}
    row = "(%s::varchar, %s::bigint, %s::bigint, %s::varchar, %s::bigint, %s::bigint)"
    params: list[Any] = [value for put in puts for value in put]
    sql = (
        f"UPDATE {quote(WorkflowClaim._meta.db_table)} AS c SET {col['epoch']} = v.epoch, "
        f"{col['engine_id']} = v.engine_id, {col['expires_at']} = v.expires_at, "
        f"{col['claimed_at']} = v.claimed_at "
        f"FROM (VALUES {', '.join([row] * len(puts))}) "
        "AS v(workflow_id, read_epoch, epoch, engine_id, expires_at, claimed_at) "
        f"WHERE c.{col['workflow_id']} = v.workflow_id AND c.{col['epoch']} = v.read_epoch"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return int(cursor.rowcount)
