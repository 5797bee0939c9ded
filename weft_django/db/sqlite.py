"""SQLite's store operations: renewals as one ``UPDATE … RETURNING``.

SQLite serialises writers (IMMEDIATE transactions take the write lock at
``BEGIN``), so there is no lock order to keep inside a statement: a renewal
is a plain ``UPDATE`` matched against a JSON list of exact holders.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from django.core import checks
from django.db import connections

from weft_django.db.base import HolderRow, StoreOps, table
from weft_django.models import WorkflowClaim

#: transaction_mode values under which concurrent writers serialise at BEGIN.
SERIALISING_TRANSACTION_MODES = frozenset({"IMMEDIATE", "EXCLUSIVE"})


class SQLiteOps(StoreOps):
    vendor: ClassVar[str] = "sqlite"

    def renew_exact_holders(
        self, using: str, holders: Sequence[HolderRow], new_expires: int
    ) -> set[str]:
        sql = (
            f"UPDATE {table(WorkflowClaim, using)} SET expires_at = %s WHERE "
            "(workflow_id, epoch, engine_id, expires_at, claimed_at) IN ("
            "SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]'), "
            "json_extract(value, '$[2]'), json_extract(value, '$[3]'), "
            "json_extract(value, '$[4]') FROM json_each(%s)) RETURNING workflow_id"
        )
        payload = json.dumps([list(h) for h in holders])
        with connections[using].cursor() as cursor:
            cursor.execute(sql, [new_expires, payload])
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
        sql = (
            f"UPDATE {table(WorkflowClaim, using)} SET expires_at = %s WHERE "
            "engine_id = %s AND epoch >= 1 AND epoch < %s AND expires_at >= 0 "
            "AND expires_at < %s AND claimed_at >= 0 AND claimed_at < %s "
            "RETURNING workflow_id, epoch, claimed_at"
        )
        params: list[Any] = [new_expires, engine_id, epoch_limit, timestamp_limit, timestamp_limit]
        with connections[using].cursor() as cursor:
            cursor.execute(sql, params)
            return [(r[0], int(r[1]), int(r[2])) for r in cursor.fetchall()]

    def capability_problems(
        self, alias: str, entry: Mapping[str, Any], ownership: str
    ) -> list[checks.CheckMessage]:
        """IMMEDIATE or EXCLUSIVE transactions, in every mode: a DEFERRED
        transaction that upgrades to a writer fails instead of waiting."""
        options = entry.get("OPTIONS", {}) or {}
        mode = str(options.get("transaction_mode", "")).upper()
        if mode in SERIALISING_TRANSACTION_MODES:
            return []
        return [
            checks.Error(
                f"SQLite database {alias!r} has transaction_mode "
                f"{options.get('transaction_mode')!r}; weft-django needs IMMEDIATE or "
                "EXCLUSIVE so that concurrent writers serialise instead of failing",
                hint='Add "OPTIONS": {"transaction_mode": "IMMEDIATE", "timeout": 30, '
                '"init_command": "PRAGMA journal_mode=WAL;"}',
                id="weft.E010",
            )
        ]
