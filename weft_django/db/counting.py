"""Counts whose cost stays bounded as history grows: exact up to a cap, estimated above.

Why: ``COUNT(*)`` reads every matching row (or index entry). The admin's and
the API's page counts, the ``/metrics`` gauges and ``weft_status`` counted
every run, claim or filter match on each request, so a year of history made
each of them a hundred times slower than on the first day. A count here
reads at most ``cap + 1`` rows (``SELECT COUNT(*) FROM (… LIMIT cap + 1)``):
at or under the cap it is exact, as before; above it, the exact number is
replaced by the database planner's estimate (PostgreSQL's ``EXPLAIN``, from
the statistics ``ANALYZE`` keeps; never below ``cap + 1``) and marked
``exact=False`` so callers can say so. Elsewhere (SQLite) there is no cheap
estimate, and the exact count is kept.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.core.paginator import Paginator
from django.db import connections
from django.db.models import Model, QuerySet
from django.utils.functional import cached_property

#: Matches counted exactly before the estimate takes over.
COUNT_CAP = 10_000


@dataclass(frozen=True)
class BoundedCount:
    """A count, and whether it is exact (``False``: an estimate above the cap)."""

    value: int
    exact: bool


def planner_estimate(queryset: QuerySet[Any]) -> int | None:
    """The planner's row estimate for ``queryset`` (PostgreSQL), else ``None``."""
    if _vendor(queryset) != "postgresql":
        return None
    plan = queryset.order_by().explain(format="json")
    parsed = json.loads(plan) if isinstance(plan, str) else plan
    return int(parsed[0]["Plan"]["Plan Rows"])


def bounded_count(queryset: QuerySet[Any], cap: int = COUNT_CAP) -> BoundedCount:
    """``queryset``'s row count: exact up to ``cap`` matches, an estimate above (PostgreSQL)."""
    if cap < 0:
        raise ValueError(f"cap must be >= 0, got {cap!r}")
    unordered = queryset.order_by()
    seen = unordered[: cap + 1].count()
    if seen <= cap:
        return BoundedCount(seen, True)
    estimate = planner_estimate(unordered)
    if estimate is None:
        return BoundedCount(unordered.count(), True)
    return BoundedCount(max(cap + 1, estimate), False)


def common_value_estimates(model: type[Model], column: str, using: str) -> dict[str, int]:
    """Rows per common value of ``column`` by the statistics ``ANALYZE`` keeps
    (PostgreSQL ``pg_stats``: its most common values' frequencies times the
    table's row estimate), in ONE statement; ``{}`` elsewhere or before any
    ``ANALYZE``. Rare values are not listed (their count is under any cap)."""
    connection = connections[using]
    if connection.vendor != "postgresql":
        return {}
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT m.v, m.f * greatest(c.reltuples, 0) FROM pg_stats AS s "
            "JOIN pg_class AS c ON c.oid = to_regclass(quote_ident(s.tablename)) "
            "CROSS JOIN LATERAL unnest(s.most_common_vals::text::text[], s.most_common_freqs) "
            "AS m(v, f) "
            "WHERE s.schemaname = current_schema() AND s.tablename = %s AND s.attname = %s",
            [model._meta.db_table, column_name(model, column)],
        )
        return {str(v): int(n) for v, n in cursor.fetchall()}


def bounded_counts(
    querysets: Mapping[str, QuerySet[Any]],
    cap: int = COUNT_CAP,
    *,
    index_order: str = "pk",
    estimates: Mapping[str, int] | None = None,
) -> dict[str, BoundedCount]:
    """``bounded_count`` of each queryset (all on one database), the capped counts
    read in ONE statement; an estimate is asked only for those above ``cap``.

    ``index_order``: the column that follows, in a composite index, the one
    each queryset filters on by equality. Ordered by it, the capped read is an
    index range of at most ``cap + 1`` entries; unordered, the planner read a
    common value's rows with a table scan that stops only after ``cap``
    matches, reading every other value's rows on the way.

    ``estimates``: estimates by key known already (``common_value_estimates``),
    used before asking the planner one ``EXPLAIN`` per key above the cap."""
    if cap < 0:
        raise ValueError(f"cap must be >= 0, got {cap!r}")
    if not querysets:
        return {}
    using = next(iter(querysets.values())).db
    connection = connections[using]
    parts = [
        qs.order_by(index_order)
        .values("pk")[: cap + 1]
        .query.get_compiler(connection=connection)
        .as_sql()
        for qs in querysets.values()
    ]
    sql = "SELECT " + ", ".join(
        f"(SELECT COUNT(*) FROM ({part}) AS capped_{k})" for k, (part, _) in enumerate(parts)
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [p for _, params in parts for p in params])
        row = cursor.fetchone()
    counts: dict[str, BoundedCount] = {}
    for (key, qs), seen in zip(querysets.items(), row, strict=True):
        if seen <= cap:
            counts[key] = BoundedCount(int(seen), True)
            continue
        known = estimates.get(key) if estimates is not None else None
        estimate = known if known is not None else planner_estimate(qs)
        counts[key] = (
            BoundedCount(qs.order_by().count(), True)
            if estimate is None
            else BoundedCount(max(cap + 1, estimate), False)
        )
    return counts


def column_name(model: type[Model], field: str) -> str:
    """The database column of ``model``'s concrete field ``field``."""
    for f in model._meta.concrete_fields:
        if f.name == field:
            return str(f.column)
    raise ValueError(f"{model.__name__} has no concrete field {field!r}")


def _vendor(queryset: QuerySet[Any]) -> str:
    return str(connections[queryset.db].vendor)


class BoundedCountPaginator(Paginator):
    """A ``Paginator`` whose ``count`` is ``bounded_count`` (``count_exact`` says which).

    For a list above the cap the last page number is an estimate: a page past
    the real end is empty rather than an error."""

    count_exact = True

    @cached_property
    def count(self) -> int:
        object_list = self.object_list
        if not isinstance(object_list, QuerySet):
            return len(object_list)
        counted = bounded_count(object_list)
        self.count_exact = counted.exact
        return counted.value


__all__ = [
    "COUNT_CAP",
    "BoundedCount",
    "BoundedCountPaginator",
    "bounded_count",
    "bounded_counts",
    "column_name",
    "common_value_estimates",
    "planner_estimate",
]
