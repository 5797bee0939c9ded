"""Statistics of the benchmarks: percentiles and distributions of samples, and
PostgreSQL's own commit counters (``pg_stat_database``), read the same way by
every benchmark so their figures compare."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any


def percentile(values: Sequence[float], p: float) -> float | None:
    """Linear-interpolated percentile (``p`` in 0..100) of ``values``."""
    if not values:
        return None
    data = sorted(values)
    if len(data) == 1:
        return data[0]
    k = (len(data) - 1) * p / 100
    lo, hi = math.floor(k), math.ceil(k)
    return data[lo] + (data[hi] - data[lo]) * (k - lo)


def distribution(values: Sequence[float], digits: int = 1) -> dict[str, Any]:
    """n, min, p50, p90, p99, max, mean of ``values``."""
    if not values:
        return {"n": 0}

    def r(x: float | None) -> float | None:
        return None if x is None else round(x, digits)

    return {
        "n": len(values),
        "min": r(min(values)),
        "p50": r(percentile(values, 50)),
        "p90": r(percentile(values, 90)),
        "p99": r(percentile(values, 99)),
        "max": r(max(values)),
        "mean": r(sum(values) / len(values)),
    }


def median(values: Iterable[float]) -> float:
    data = list(values)
    value = percentile(data, 50)
    assert value is not None
    return value


def rnd(x: float | None, digits: int = 3) -> float | None:
    return None if x is None else round(x, digits)


# -- PostgreSQL statistics ----------------------------------------------------------------


def db_stats(conn: Any) -> dict[str, int]:
    """``xact_commit``, ``xact_rollback``, ``sessions`` of the connection's database,
    freshly flushed (PostgreSQL 15+). The three statements of one call are
    themselves counted (see ``benchmarks/commits_per_workflow.py``)."""
    conn.execute("SELECT pg_stat_force_next_flush()")
    conn.execute("SELECT pg_stat_clear_snapshot()")
    row = conn.execute(
        "SELECT xact_commit, xact_rollback, sessions FROM pg_stat_database "
        "WHERE datname = current_database()"
    ).fetchone()
    return {"xact_commit": int(row[0]), "xact_rollback": int(row[1]), "sessions": int(row[2])}


STATS_OVERHEAD = 3  # the autocommit statements of one ``db_stats`` call
