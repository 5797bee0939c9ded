"""Renewal cost: one ``renew_all()`` pass over 100, 1,000 and 10,000 held claims.

Ours: a ``ClaimRegistry`` (a standalone engine's, scope ``"held"``) holding N
claims renews them all in one pass — ONE ``UPDATE … FROM
jsonb_to_recordset(…) … RETURNING`` conditioned on each claim's exact holder
(SPEC §4.4). Also measured: scope ``"engine"`` (a Celery node's: ``UPDATE …
WHERE engine_id = me RETURNING``).

Baseline: one raw bulk UPDATE of the same rows through the same connection:
``UPDATE weft_workflow_claim SET expires_at = %s WHERE workflow_id = ANY(%s)
RETURNING workflow_id``.

Round trips are counted with ``CaptureQueriesContext`` (they must stay the
same for every N); times are wall-clock per pass, median of the repetitions,
with ours and the baseline alternating (order flipping each repetition).
Target: ours ≤ 1.5 × baseline at 10,000 claims.

The N held claims are seeded directly (rows inserted with their holder, the
registry's in-memory record filled through its private ``_track``): acquiring
10,000 claims one by one would measure acquire, not renewal.
"""

from __future__ import annotations

import sys
import time
from typing import Any

from benchmarks import common, stats

SIZES = (100, 1_000, 10_000)
TARGET = 1.5
TTL_MS = 30_000


def run(quick: bool, publish: bool = True) -> dict[str, Any]:
    machine = common.Machine()
    url = common.bench_url()
    common.ensure_database(url)
    common.setup_django(url)
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from weft_django.kernel.clock import wall_ms as wall_clock_ms
    from weft_django.models import WorkflowClaim
    from weft_django.ownership.codec import HolderRecord
    from weft_django.ownership.registry import ClaimRegistry

    table = WorkflowClaim._meta.db_table
    reps = 7 if quick else 15
    engine_id = "bench-renewal"
    raw_sql = (
        f"UPDATE {table} SET expires_at = %s WHERE workflow_id = ANY(%s) RETURNING workflow_id"
    )
    results: dict[int, dict[str, Any]] = {}
    for size in SIZES:
        common.reset_tables()
        now = wall_clock_ms()
        # Three disjoint sets of N identical rows, one per variant: each renewal moves
        # expires_at, and the exact-holder pass must never see rows another moved.
        sets = {
            name: (f"{engine_id}-{name}", [f"renew-{name}-{k:05d}" for k in range(size)])
            for name in ("ours", "engine_scope", "baseline")
        }
        WorkflowClaim.objects.bulk_create(
            [
                WorkflowClaim(
                    workflow_id=w,
                    epoch=1,
                    engine_id=owner,
                    expires_at=now + TTL_MS,
                    claimed_at=now,
                )
                for owner, wids in sets.values()
                for w in wids
            ],
            batch_size=2_000,
        )
        connection.cursor().execute(f"VACUUM ANALYZE {table}")
        held = ClaimRegistry(
            engine_id=sets["ours"][0],
            clock=wall_clock_ms,
            claim_ttl_ms=TTL_MS,
            claim_renew_interval_ms=5_000,
        )
        scoped = ClaimRegistry(
            engine_id=sets["engine_scope"][0],
            clock=wall_clock_ms,
            claim_ttl_ms=TTL_MS,
            claim_renew_interval_ms=5_000,
            renew_scope="engine",
        )
        for registry, (owner, wids) in ((held, sets["ours"]), (scoped, sets["engine_scope"])):
            for w in wids:
                registry._track(w, HolderRecord(owner, 1, now + TTL_MS, now))
        ids = sets["baseline"][1]

        def ours(held: ClaimRegistry = held) -> tuple[float, int, int]:
            with CaptureQueriesContext(connection) as queries:
                t0 = time.perf_counter()
                outcomes = held.renew_all()
                elapsed = time.perf_counter() - t0
            renewed = sum(1 for o in outcomes if o.status == "renewed")
            return elapsed, len(queries.captured_queries), renewed

        def engine_scope(scoped: ClaimRegistry = scoped) -> tuple[float, int, int]:
            with CaptureQueriesContext(connection) as queries:
                t0 = time.perf_counter()
                outcomes = scoped.renew_all()
                elapsed = time.perf_counter() - t0
            renewed = sum(1 for o in outcomes if o.status == "renewed")
            return elapsed, len(queries.captured_queries), renewed

        def baseline(ids: list[str] = ids) -> tuple[float, int, int]:
            with CaptureQueriesContext(connection) as queries:
                t0 = time.perf_counter()
                with connection.cursor() as cursor:
                    cursor.execute(raw_sql, [wall_clock_ms() + TTL_MS, ids])
                    renewed = len(cursor.fetchall())
                elapsed = time.perf_counter() - t0
            return elapsed, len(queries.captured_queries), renewed

        variants = {"ours": ours, "engine_scope": engine_scope, "baseline": baseline}
        for fn in variants.values():  # warm-up: plans, caches
            fn()
        samples: dict[str, list[tuple[float, int, int]]] = {k: [] for k in variants}
        names = list(variants)
        for r in range(reps):
            order = names if r % 2 == 0 else names[::-1]
            for name in order:
                samples[name].append(variants[name]())
        results[size] = {
            name: {
                "ms": round(stats.median(s[0] for s in rows) * 1000, 2),
                "ms_all": [round(s[0] * 1000, 2) for s in rows],
                "round_trips": sorted({s[1] for s in rows}),
                "renewed": sorted({s[2] for s in rows}),
            }
            for name, rows in samples.items()
        }
    common.reset_tables()

    figures = {
        f"{n}_claims": {
            "ms": results[n]["ours"]["ms"],
            "round_trips": results[n]["ours"]["round_trips"],
            "renewed": results[n]["ours"]["renewed"],
            "engine_scope_ms": results[n]["engine_scope"]["ms"],
            "engine_scope_round_trips": results[n]["engine_scope"]["round_trips"],
        }
        for n in SIZES
    }
    trips = {t for n in SIZES for t in results[n]["ours"]["round_trips"]}
    figures["round_trips_constant"] = len(trips) == 1
    baseline_doc = {
        f"{n}_claims": {
            "ms": results[n]["baseline"]["ms"],
            "round_trips": results[n]["baseline"]["round_trips"],
        }
        for n in SIZES
    }
    ratios = {
        f"{n}_claims": round(results[n]["ours"]["ms"] / results[n]["baseline"]["ms"], 3)
        for n in SIZES
    }
    at_max = ratios[f"{max(SIZES)}_claims"]
    ratio = {
        **ratios,
        "engine_scope": {
            f"{n}_claims": round(results[n]["engine_scope"]["ms"] / results[n]["baseline"]["ms"], 3)
            for n in SIZES
        },
        "headline": f"ours / baseline at {max(SIZES):,} claims (median pass time)",
        "value": at_max,
        "target": f"<= {TARGET}",
        "met": at_max <= TARGET,
    }
    pngs = [_plot(results, publish)]
    return common.document(
        "renewal",
        mode="quick" if quick else "full",
        figures=figures,
        baseline=baseline_doc,
        ratio=ratio,
        settings={
            "sizes": list(SIZES),
            "repetitions": reps,
            "claim_ttl_ms": TTL_MS,
            "renew_scope": "held (standalone engine); engine scope reported beside it",
            "timing": "wall clock around renew_all() / the raw cursor.execute+fetchall, "
            "in-process, same Django connection; median of the repetitions",
            "database": url,
        },
        machine=machine,
        notes=[
            "Round trips counted by CaptureQueriesContext: every statement Django runs.",
            "Each variant renews its own set of N identical rows (3N rows in the table), so "
            "no pass sees rows another one moved.",
            "Ours builds a JSON document of the N exact holders and joins it "
            "(jsonb_to_recordset) so a claim changed by anyone else is not renewed back; "
            "the baseline trusts an id list.",
        ],
        url=url,
        pngs=pngs,
    )


def _plot(results: dict[int, dict[str, Any]], publish: bool) -> str:
    plt = common.pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    for key, label, marker in (
        ("ours", "renew_all (scope held: exact holders)", "o"),
        ("engine_scope", "renew_all (scope engine)", "^"),
        ("baseline", "raw bulk UPDATE (baseline)", "s"),
    ):
        ax.plot(SIZES, [results[n][key]["ms"] for n in SIZES], marker=marker, label=label)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("claims held")
    ax.set_ylabel("one renewal pass, ms (median)")
    ax.set_title("Renewal cost on PostgreSQL: one statement per pass")
    ax.grid(alpha=0.3, which="both")
    ax.legend()
    path = common.publish_png(fig, "renewal", publish)
    plt.close(fig)
    return path


def main(argv: list[str] | None = None) -> int:
    return common.simple_main(run, __doc__, argv)


if __name__ == "__main__":
    sys.exit(main())
