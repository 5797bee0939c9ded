"""Query plans of the operations that must not slow down as history grows (issue #21).

Invariant protected: every statement of one renewal pass, one polling pass,
a batch pickup, the admin run list and run page, the API's filtered list, a
``/metrics`` scrape and ``weft_status`` reaches the rows it needs through an
index -- PostgreSQL's ``EXPLAIN`` shows no ``Seq Scan`` of a large weft
table (runs, claims, claim events, timers, journal). A sequential scan
reads the whole history on every call: fine at a thousand runs, a hundred
times slower at a hundred thousand (``benchmarks.scale`` measures that).

One exception, because it is bounded by construction: a ``Seq Scan`` that
feeds a ``Limit`` with no blocking node in between (no sort, aggregate,
hash or materialisation) stops after the limit's rows -- the capped counts
of ``db.counting`` read at most ``cap + 1`` matching rows that way.

The history is the benchmark's (``benchmarks.scale_seed``: parked runs with
their claims, claim events, timers and journals, written by set-based SQL),
100,000 workflows, ``ANALYZE``-d so the planner sees its real size; the
statements are the ones each operation really ran, captured with
``CaptureQueriesContext``. PostgreSQL only: SQLite's planner is another
story and its stores are small.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from benchmarks import scale
from benchmarks.scale_seed import SeedShape, analyze, seed_engines, seed_parked
from weft_django.kernel.clock import wall_ms

pytestmark = pytest.mark.usefixtures("batch_db")

#: Large enough that the planner prefers an index wherever one helps: at
#: 20,000 claims a 100-workflow pickup batch's claim lookups (one OR arm per
#: workflow, the fenced statement) are still cheaper as one table scan.
WORKFLOWS = 100_000
#: The tables that grow with history; a scan of a small one (engine records,
#: the mode marker, the metric totals) costs nothing.
LARGE_TABLES = frozenset(
    {
        "weft_workflowrun",
        "weft_workflowclaim",
        "weft_claimevent",
        "weft_timer",
        "weft_journalentry",
    }
)
#: Nodes that read their whole input before returning a row: a Seq Scan below
#: one is unbounded even under a Limit.
BLOCKING = frozenset(
    {"Sort", "Incremental Sort", "Aggregate", "Hash", "Materialize", "SetOp", "WindowAgg"}
)
_CURSOR = re.compile(
    r"^DECLARE\s+\S+\s+(NO\s+SCROLL\s+)?CURSOR\s+(WITH(OUT)?\s+HOLD\s+)?FOR\s+", re.I
)


@pytest.fixture(autouse=True)
def _postgresql_only() -> None:
    if connection.vendor != "postgresql":
        pytest.skip("EXPLAIN plans are PostgreSQL's (SQLite stores stay small)")


@pytest.fixture
def bench() -> Iterator[scale.Bench]:
    # One journal row per run (and the run page's long one): the journal is
    # read by run only, and a million rows would only slow the seeding down.
    shape = SeedShape(journal_per_run=1)
    with connection.cursor() as cursor:
        now = wall_ms()
        seed_engines(cursor, shape, now)
        seed_parked(cursor, 1, WORKFLOWS, shape, now)
        analyze(cursor)
    bench = scale.Bench(shape)
    bench.track_held()
    try:
        yield bench
    finally:
        bench.dispose()


def unbounded_seq_scans(plan: dict[str, Any], limited: bool = False) -> Iterator[str]:
    """The large tables ``plan`` reads with a Seq Scan not cut short by a Limit."""
    kind = plan["Node Type"]
    if kind == "Limit":
        limited = True
    elif kind in BLOCKING:
        limited = False
    if kind == "Seq Scan" and plan.get("Relation Name") in LARGE_TABLES and not limited:
        yield str(plan["Relation Name"])
    for child in plan.get("Plans", ()):
        yield from unbounded_seq_scans(child, limited)


def explainable(sql: str) -> str | None:
    """The statement to EXPLAIN (a server-side cursor's query), or None (BEGIN, ...)."""
    sql = _CURSOR.sub("", sql.strip())
    head = sql.split(None, 1)[0].upper() if sql else ""
    return sql if head in {"SELECT", "WITH", "UPDATE", "DELETE", "INSERT"} else None


def plans_of(captured: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for query in captured:
        sql = explainable(query["sql"])
        if sql is None:
            continue
        with connection.cursor() as cursor:
            cursor.execute("EXPLAIN (FORMAT JSON) " + sql.replace("%", "%%"))
            raw = cursor.fetchone()[0]
        plan = raw if isinstance(raw, list) else json.loads(raw)
        out.append((sql, plan[0]["Plan"]))
    return out


def touches_large_table(plan: dict[str, Any]) -> bool:
    if plan.get("Relation Name") in LARGE_TABLES:
        return True
    return any(touches_large_table(child) for child in plan.get("Plans", ()))


def run_captured(bench: scale.Bench, operation: str) -> list[dict[str, Any]]:
    prefix = bench.pickup_setup() if operation == "pickup" else None
    try:
        with CaptureQueriesContext(connection) as captured:
            getattr(bench, operation)()
    finally:
        if prefix is not None:
            bench.pickup_teardown(prefix)
    return captured.captured_queries


def test_no_operation_scans_a_large_table(bench: scale.Bench) -> None:
    """Every operation, on one seeded history (seeding is the slow part)."""
    found: dict[str, list[tuple[list[str], str]]] = {}
    for operation in scale.OPERATIONS:
        run_captured(bench, operation)  # warm-up: first-call reads (sessions, caches)
        plans = plans_of(run_captured(bench, operation))
        assert any(touches_large_table(plan) for _, plan in plans), (
            f"{operation}: no statement read a weft table; nothing was checked"
        )
        scans = [
            (sorted(set(unbounded_seq_scans(plan))), sql[:300])
            for sql, plan in plans
            if any(unbounded_seq_scans(plan))
        ]
        if scans:
            found[operation] = scans
    assert not found, f"sequential scans of large tables: {found}"


def test_the_checker_sees_a_seq_scan() -> None:
    """The check can fail: a count of every run's names is a sequential scan,
    and a capped read of the same rows is not held against it."""
    ((_, full),) = plans_of([{"sql": "SELECT count(DISTINCT name) FROM weft_workflowrun"}])
    assert list(unbounded_seq_scans(full)) == ["weft_workflowrun"]
    ((_, capped),) = plans_of(
        [{"sql": "SELECT count(*) FROM (SELECT id FROM weft_workflowrun LIMIT 101) AS c"}]
    )
    assert list(unbounded_seq_scans(capped)) == []
