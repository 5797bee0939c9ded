"""Commits per workflow (SPEC §4.2): a workflow of three activities takes at
most 5 commits from ``client.start`` to completion.

Usage::

    .venv/bin/python benchmarks/commits_per_workflow.py [--runs N] [--no-migrate]

Prints one JSON object: ``{"commits_per_workflow": n, "method": "...",
"database": "...", ...}``. ``DATABASE_URL`` must point at PostgreSQL; by
default the script uses (and creates and migrates, with ``manage.py
migrate``) its own database ``weft_bench`` on 127.0.0.1:5432.

Method (exact, and the same one ``tests/engines/test_commit_count.py``
asserts): one in-process ``Engine(clock=<fake clock>,
background_tasks="manual")`` drives the ``three-steps`` demo workflow on the
calling thread, so every statement of ``client.start`` and of the engine
goes through ONE Django connection. ``CommitCounter`` watches it:

- ``connection.execute_wrapper`` sees every statement with the
  connection's ``in_atomic_block`` state at that moment;
- ``connection.commit`` / ``connection.rollback`` are wrapped on the
  instance: Django calls exactly these when an outermost
  ``transaction.atomic()`` block ends.

A transaction is therefore either an outermost atomic block (its
statements are those seen while ``in_atomic_block``; it ends with one
``commit()`` or ``rollback()``) or a single statement run in autocommit
mode (PostgreSQL commits it by itself). A *write commit* is a committed
transaction containing at least one INSERT, UPDATE or DELETE. Statements
run inside activities (user code: the demo's ``SideEffect`` rows) are never
seen: activities run on the engine's activity executor, on its own threads
and their own connections. ``NOTIFY`` (``SELECT pg_notify``, sent on commit)
and read-only transactions are counted separately and are not write
commits. The fake clock never moves, so no periodic heartbeat or renewal
falls into the window; the engine boots and runs one maintenance pass
before counting starts.

Cross-check: ``pg_stat_database.xact_commit`` of the database, read after
``pg_stat_force_next_flush()`` (PostgreSQL 15+) and
``pg_stat_clear_snapshot()``, counts every committed transaction (reads
included); its delta over the window is reported beside the counter's
total. It is larger by what no execute wrapper sees: each session the
engine reopened (``reconnects``: PostgreSQL's session start-up and Django's
``SET TIME ZONE``, read-only) and any other session, e.g. autovacuum.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.db.backends.signals import connection_created

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_URL = "postgres://postgres@127.0.0.1:5432/weft_bench"
WRITE_VERBS = ("INSERT", "UPDATE", "DELETE")
METHOD = (
    "execute_wrapper + wrapped connection.commit/rollback on the one connection of an "
    "in-process manual Engine: committed transactions (outermost atomic blocks and "
    "autocommit statements) containing an INSERT/UPDATE/DELETE, activity statements excluded"
)


@dataclass
class Transaction:
    kind: str  # "atomic" | "autocommit"
    statements: list[str] = field(default_factory=list)
    outcome: str = "open"  # "commit" | "rollback"
    #: Whether the transaction wrote a row (it has a transaction id), asked of
    #: PostgreSQL just before its COMMIT; ``None`` where not asked (autocommit).
    wrote: bool | None = None

    @property
    def writes(self) -> list[str]:
        return [s for s in self.statements if _verb(s) in WRITE_VERBS]

    @property
    def is_write_commit(self) -> bool:
        """Committed with a write statement that wrote -- a pickup's claim
        statement (``INSERT … ON CONFLICT`` over no pending run) inserts
        nothing, so PostgreSQL assigns it no transaction id: a read."""
        return self.outcome == "commit" and bool(self.writes) and self.wrote is not False

    def tables(self) -> list[str]:
        return sorted({t for s in self.writes for t in _tables(s)})


#: A write inside any statement -- plain, or a data-modifying CTE (``WITH w AS
#: (INSERT …)``: the fenced batch's one-statement checkpoint) -- and its table.
_WRITE = re.compile(r'\b(INSERT\s+INTO|DELETE\s+FROM|UPDATE)\s+"?([\w.]+)"?', re.IGNORECASE)


def _writes(sql: str) -> list[re.Match[str]]:
    """The statement's writes (``FOR UPDATE`` is a lock, not a write)."""
    return [
        match
        for match in _WRITE.finditer(sql)
        if not (
            match.group(1).upper() == "UPDATE"
            and sql[: match.start()].rstrip().upper().endswith("FOR")
        )
    ]


def _verb(sql: str) -> str:
    """INSERT / UPDATE / DELETE for a statement that writes, else its first word."""
    writes = _writes(sql)
    if writes:
        return writes[0].group(1).split()[0].upper()
    return sql.lstrip().split(None, 1)[0].upper() if sql.strip() else ""


def _tables(sql: str) -> list[str]:
    return [match.group(2) for match in _writes(sql)]


def _assigned_xid(conn: Any) -> bool | None:
    """Whether the open transaction has a transaction id (it wrote), on the raw
    driver cursor (unseen by execute wrappers); ``None`` off PostgreSQL."""
    if conn.vendor != "postgresql" or conn.connection is None:
        return None
    with conn.connection.cursor() as cursor:
        cursor.execute("SELECT txid_current_if_assigned() IS NOT NULL")
        row = cursor.fetchone()
    return bool(row[0]) if row else None


class CommitCounter:
    """Counts the transactions of one connection (see the module docstring).

    The engine closes and reopens the connection between turns
    (``close_old_connections()`` with ``CONN_MAX_AGE=0``), so ``reconnects``
    is reported: PostgreSQL counts a new session's start-up and Django's
    set-up (``SET TIME ZONE`` on the raw driver cursor, unseen by execute
    wrappers) as commits in ``pg_stat_database`` — reads and session
    settings, never a write.
    """

    def __init__(self, connection: Any) -> None:
        from django.db import connections
        from django.db.backends.base.base import BaseDatabaseWrapper

        if not isinstance(connection, BaseDatabaseWrapper):  # django.db.connection (a proxy)
            connection = connections[connection._alias]
        self.connection = connection
        self.transactions: list[Transaction] = []
        self._open: Transaction | None = None
        self.active = False
        self.reconnects = 0  # new connections opened during the window

    # -- hooks -------------------------------------------------------------
    def __call__(self, execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        if self.active:
            self._observe(sql)
        return execute(sql, params, many, context)

    def _observe(self, sql: str) -> None:
        if self.connection.in_atomic_block:
            if self._open is None:
                self._open = Transaction("atomic")
            self._open.statements.append(sql)
        else:
            # Autocommit: the statement is its own transaction, committed by the server.
            self.transactions.append(Transaction("autocommit", [sql], outcome="commit"))

    def _end(self, outcome: str) -> None:
        if self._open is not None:
            self._open.outcome = outcome
            self.transactions.append(self._open)
            self._open = None

    @contextmanager
    def watching(self, engine: Any = None) -> Iterator[CommitCounter]:
        conn = self.connection
        real_commit, real_rollback = conn.commit, conn.rollback

        def commit() -> None:
            if self.active and self._open is not None and self._open.writes:
                self._open.wrote = _assigned_xid(conn)
            real_commit()
            if self.active:
                self._end("commit")

        def rollback() -> None:
            real_rollback()
            if self.active:
                self._end("rollback")

        def connected(sender: Any, connection: Any, **kwargs: Any) -> None:
            if connection is conn and self.active:
                self.reconnects += 1

        conn.commit, conn.rollback = commit, rollback
        connection_created.connect(connected, weak=False)
        try:
            with conn.execute_wrapper(self):
                self.active = True
                try:
                    yield self
                finally:
                    self.active = False
        finally:
            connection_created.disconnect(connected)
            del conn.commit, conn.rollback  # back to the class methods

    # -- figures -----------------------------------------------------------
    @property
    def write_commits(self) -> list[Transaction]:
        return [t for t in self.transactions if t.is_write_commit]

    @property
    def committed(self) -> list[Transaction]:
        return [t for t in self.transactions if t.outcome == "commit"]

    def summary(self) -> dict[str, Any]:
        engine = self.transactions
        return {
            "write_commits": len(self.write_commits),
            "write_commit_tables": [t.tables() for t in self.write_commits],
            "read_only_commits": len(
                [
                    t
                    for t in engine
                    if t.outcome == "commit"
                    and not t.writes
                    and not any("pg_notify" in s for s in t.statements)
                ]
            ),
            "notify_commits": len(
                [t for t in engine if any("pg_notify" in s for s in t.statements)]
            ),
            "rollbacks": len([t for t in self.transactions if t.outcome == "rollback"]),
            "all_commits": len(self.committed),
            "reconnects": self.reconnects,
        }


def xact_commit(connection: Any) -> int:
    """``pg_stat_database.xact_commit`` of the current database, freshly flushed.

    Each call runs three autocommit statements; the first two are counted
    in the value the next call reads, the last one in the call after that.
    """
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_force_next_flush()")
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute(
            "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()"
        )
        return int(cursor.fetchone()[0])


XACT_OVERHEAD = 3  # the statements of one ``xact_commit()`` call


def measure_three_steps(engine: Any, connection: Any, workflow_id: str) -> dict[str, Any]:
    """Start ``three-steps`` and drive it to completion under a ``CommitCounter``."""
    from weft_django import client
    from weft_django.models import WorkflowRun

    engine.boot()
    engine.run_maintenance()  # boot-time writes (EngineRecord, first heartbeat) happen here
    counter = CommitCounter(connection)
    before = xact_commit(connection) if connection.vendor == "postgresql" else None
    with counter.watching(engine):
        handle = client.start("three-steps", {"id": workflow_id}, workflow_id=workflow_id)
        engine.run_until_idle(timeout=60)
    after = xact_commit(connection) if connection.vendor == "postgresql" else None
    run = WorkflowRun.objects.using(engine.settings.database).get(pk=handle.run_id)
    summary = counter.summary()
    summary.update(
        status=run.status,
        result=run.result,
        pg_stat_xact_commit_delta=None if before is None else after - before - XACT_OVERHEAD,
    )

    return summary


def _ensure_database(url: str) -> None:
    """Create the benchmark database if it is missing, then migrate it."""
    import psycopg

    from project.dburl import parse_database_url

    settings = parse_database_url(url, REPO_ROOT)
    name = settings["NAME"]
    admin = psycopg.connect(
        dbname="postgres",
        user=settings.get("USER") or "postgres",
        host=settings.get("HOST") or "127.0.0.1",
        port=settings.get("PORT") or 5432,
        password=settings.get("PASSWORD") or None,
        autocommit=True,
    )
    with admin:
        exists = admin.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone()
        if not exists:
            admin.execute(f'CREATE DATABASE "{name}"')
    env = {**os.environ, "DATABASE_URL": url, "PYTHONPATH": str(REPO_ROOT)}
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"],
        cwd=REPO_ROOT,
        env=env,
        check=True,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="workflows measured (max reported)")
    parser.add_argument("--no-migrate", action="store_true", help="DATABASE_URL is migrated")
    args = parser.parse_args(argv)

    url = os.environ.setdefault("DATABASE_URL", DEFAULT_URL)
    if not url.startswith(("postgres://", "postgresql://")):
        parser.error(f"DATABASE_URL must point at PostgreSQL, got {url!r}")
    sys.path.insert(0, str(REPO_ROOT))
    if not args.no_migrate:
        _ensure_database(url)
    os.environ["DJANGO_SETTINGS_MODULE"] = "project.settings"
    import django

    django.setup()
    from django.db import connections

    from weft_django.conf import get_settings
    from weft_django.engine import Engine
    from weft_django.testing import FakeClock

    db = get_settings().database
    connection = connections[db]
    engine = Engine(clock=FakeClock(), background_tasks="manual")
    runs = []
    try:
        for _ in range(max(1, args.runs)):
            runs.append(measure_three_steps(engine, connection, f"bench-{uuid.uuid4().hex[:12]}"))
    finally:
        engine.dispose(grace=0)
    bad = [r for r in runs if r["status"] != "completed"]
    if bad:
        print(json.dumps({"error": "a workflow did not complete", "runs": bad}), file=sys.stderr)
        return 1
    settings = connection.settings_dict
    print(
        json.dumps(
            {
                "commits_per_workflow": max(r["write_commits"] for r in runs),
                "method": METHOD,
                "database": f"PostgreSQL {connection.pg_version // 10000}."
                f"{connection.pg_version % 10000} {settings['HOST']}:{settings['PORT']}/"
                f"{settings['NAME']}",
                "runs": len(runs),
                "per_run": [r["write_commits"] for r in runs],
                "write_commit_tables": runs[-1]["write_commit_tables"],
                "all_commits_incl_reads": runs[-1]["all_commits"],
                "pg_stat_xact_commit_delta": runs[-1]["pg_stat_xact_commit_delta"],
                "reconnects": runs[-1]["reconnects"],
                "spec_bound": 5,
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
