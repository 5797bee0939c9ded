"""Scale: each operation's cost at 100,000 parked workflows against 1,000 (issue #21).

A team with a year of history has hundreds of thousands of parked workflows
and millions of journal rows; what an engine, an operator or a scraper does
every few seconds must not grow with them. This benchmark seeds, on
PostgreSQL, a SMALL history (``--small`` parked workflows, default 1,000,
about 10 journal rows each) and measures every operation below, then grows it
to the LARGE history (``--large``, default 100,000 workflows and about
1,000,000 journal rows, the small one included) and measures again. The
figure of each operation is its large ÷ small ratio; target ≤ 2.0.

The rows are the rows real parked workflows have (``benchmarks.scale_seed``:
runs, claims held by live engines, acquire events, timers, journals), written
with set-based SQL and ``ANALYZE``-d. Operations, each the median of the
repetitions (in-process, one connection, warmed up once):

- ``renewal``: one ``renew_all()`` pass of an engine holding 500 claims (the
  same 500 in both histories; the rest belong to nine other live engines);
- ``polling``: one maintenance pass of that engine (``find_and_dispatch``:
  retention, timeouts, reclaim scan, due timers, woken and stranded runs,
  pickup) plus ``due_in_ms`` (what a pass that backs off asks);
- ``pickup``: a batch pickup of 100 pending runs (``pick_up_batch``; the 100
  are inserted, then removed again, outside the timing);
- ``admin_list``: the admin changelist of runs (Django test client, a
  logged-in superuser); ``admin_run_page``: the admin page of the run with
  the long journal;
- ``api_list``: ``GET /api/weft/workflows/?status=parked&name=bench-sleeper
  &page=2&page_size=50`` (smaller pages below 200 workflows);
- ``metrics``: ``GET /metrics`` (the cluster collector);
- ``weft_status``: ``call_command("weft_status", "--json")``.

``--quick`` (the default): 200 / 20,000; ``--full``: 1,000 / 100,000;
``--small`` / ``--large`` set them.
"""

from __future__ import annotations

import io
import sys
import time
from collections.abc import Callable
from typing import Any

from benchmarks import common, stats
from benchmarks.scale_seed import MEASURED_ENGINE, SeedShape

TARGET = 2.0
PICKUP = 100
OPERATIONS = (
    "renewal",
    "polling",
    "pickup",
    "admin_list",
    "admin_run_page",
    "api_list",
    "metrics",
    "weft_status",
)
#: Page 2 of the sleepers (half the runs); ``page_size`` shrinks for toy histories.
API_QUERY = "?status=parked&name=bench-sleeper&page=2&page_size={size}"


def api_query(small: int) -> str:
    return API_QUERY.format(size=max(1, min(50, small // 4)))


def _shape(small: int) -> SeedShape:
    # The measured engine's 500 claims must fit in the small history.
    return SeedShape(held=min(500, max(1, small // 2)), long_journal=min(1_000, 10 * small))


class Bench:
    """The seeded database, the engines and the logged-in client of one run."""

    def __init__(self, shape: SeedShape, small: int = 1_000) -> None:
        from django.contrib.auth import get_user_model
        from django.test import Client

        from weft_django.engine import Engine

        self.shape = shape
        self.api_query = api_query(small)
        self.engine = Engine(MEASURED_ENGINE).boot()
        self.picker = Engine("scale-picker").boot()
        user_model = get_user_model()
        user = user_model.objects.filter(username="scale-admin").first()
        if user is None:
            user = user_model.objects.create_superuser("scale-admin", "scale@example.com", "x")
        self.client = Client()
        self.client.force_login(user)
        self.rep = 0

    def track_held(self) -> None:
        """The measured engine's registry knows its seeded claims (as after its turns)."""
        from weft_django.models import WorkflowClaim
        from weft_django.ownership.codec import HolderRecord

        assert self.engine.registry is not None
        rows = WorkflowClaim.objects.filter(engine_id=MEASURED_ENGINE).values_list(
            "workflow_id", "epoch", "expires_at", "claimed_at"
        )
        for wid, epoch, expires_at, claimed_at in rows:
            self.engine.registry._track(
                wid, HolderRecord(MEASURED_ENGINE, epoch, expires_at, claimed_at)
            )

    def dispose(self) -> None:
        for engine in (self.engine, self.picker):
            engine.dispose(grace=0)

    # -- the operations (each returns a check value: what it saw) ---------------------
    def renewal(self) -> int:
        assert self.engine.registry is not None
        outcomes = self.engine.registry.renew_all()
        renewed = sum(1 for o in outcomes if o.status == "renewed")
        if renewed != self.shape.held:
            raise AssertionError(f"renewal renewed {renewed} claims, expected {self.shape.held}")
        return renewed

    def polling(self) -> int:
        found = self.engine.maintenance.find_and_dispatch()
        self.engine.maintenance.due_in_ms()
        if found:
            raise AssertionError(f"the polling pass found {found} turns in a parked history")
        return found

    def pickup_setup(self) -> str:
        from django.db import connection

        from benchmarks.scale_seed import insert_pending

        self.rep += 1
        prefix = f"scale-pick-{self.rep}"
        with connection.cursor() as cursor:
            insert_pending(cursor, prefix, PICKUP)
        return prefix

    def pickup(self) -> int:
        from weft_django.engine.maintenance.pickup import pick_up_batch

        got = pick_up_batch(self.picker, PICKUP)
        if len(got.picked) != PICKUP:
            raise AssertionError(f"the pickup took {len(got.picked)} of {PICKUP} pending runs")
        return len(got.picked)

    def pickup_teardown(self, prefix: str) -> None:
        from django.db import connection

        from benchmarks.scale_seed import delete_prefixed

        assert self.picker.registry is not None
        for wid in self.picker.registry.tracked():
            self.picker.registry._untrack(wid)
        with connection.cursor() as cursor:
            delete_prefixed(cursor, prefix)

    def _get(self, url: str) -> int:
        response = self.client.get(url)
        if response.status_code != 200:
            raise AssertionError(f"GET {url}: {response.status_code}")
        return len(response.content)

    def admin_list(self) -> int:
        from django.urls import reverse

        return self._get(reverse("admin:weft_workflowrun_changelist"))

    def admin_run_page(self) -> int:
        from django.urls import reverse

        from weft_django.models import WorkflowRun

        pk = WorkflowRun.objects.filter(workflow_id="scale-0000001").values_list("pk", flat=True)
        return self._get(reverse("admin:weft_workflowrun_change", args=[pk.get()]))

    def api_list(self) -> int:
        from django.urls import reverse

        return self._get(reverse("weft:workflow-list") + self.api_query)

    def metrics(self) -> int:
        return self._get("/metrics")

    def weft_status(self) -> int:
        from django.core.management import call_command

        out = io.StringIO()
        call_command("weft_status", "--json", stdout=out)
        return len(out.getvalue())


def _time(fn: Callable[[], Any]) -> tuple[float, int]:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as captured:
        t0 = time.perf_counter()
        fn()
        elapsed = time.perf_counter() - t0
    return elapsed, len(captured)


def measure(bench: Bench, reps: int) -> dict[str, dict[str, Any]]:
    """Each operation: warm-up, then ``reps`` timed runs (median, all, statements)."""
    bench.track_held()
    bench.renewal()  # seeding took a while: the measured claims are fresh again
    out: dict[str, dict[str, Any]] = {}
    for name in OPERATIONS:
        samples: list[tuple[float, int]] = []
        for rep in range(reps + 1):
            if name == "pickup":
                prefix = bench.pickup_setup()
                try:
                    sample = _time(bench.pickup)
                finally:
                    bench.pickup_teardown(prefix)
            else:
                sample = _time(getattr(bench, name))
            if rep:  # the first is the warm-up
                samples.append(sample)
        out[name] = {
            "ms": stats.rnd(stats.median(s[0] for s in samples) * 1000, 3),
            "min_ms": stats.rnd(min(s[0] for s in samples) * 1000, 3),
            "ms_all": [stats.rnd(s[0] * 1000, 3) for s in samples],
            "statements": sorted({s[1] for s in samples}),
        }
        print(f"# {name}: {out[name]['ms']} ms", file=sys.stderr, flush=True)
    return out


def _counts() -> dict[str, int]:
    from django.db import connection

    counts = {}
    with connection.cursor() as cursor:
        for label, table in (
            ("runs", "weft_workflowrun"),
            ("journal_rows", "weft_journalentry"),
            ("claims", "weft_workflowclaim"),
            ("timers", "weft_timer"),
            ("claim_events", "weft_claimevent"),
        ):
            cursor.execute(f"SELECT count(*) FROM {table}")
            counts[label] = int(cursor.fetchone()[0])
    return counts


def run(
    quick: bool = True,
    publish: bool = True,
    small: int | None = None,
    large: int | None = None,
    reps: int | None = None,
) -> dict[str, Any]:
    machine = common.Machine()
    url = common.bench_url()
    common.ensure_database(url)
    common.setup_django(url)
    from django.db import connection

    from benchmarks.scale_seed import analyze, seed_engines, seed_parked
    from weft_django.kernel.clock import wall_ms

    n_small = small or (200 if quick else 1_000)
    n_large = large or (20_000 if quick else 100_000)
    if n_large <= n_small:
        raise SystemExit(f"--large ({n_large}) must be more than --small ({n_small})")
    reps = reps or (5 if quick else 9)
    shape = _shape(n_small)
    common.reset_tables()
    seeding: dict[str, float] = {}
    histories: dict[str, dict[str, Any]] = {}
    bench: Bench | None = None
    try:
        for label, first, last in (("small", 1, n_small), ("large", n_small + 1, n_large)):
            t0 = time.perf_counter()
            with connection.cursor() as cursor:
                now = wall_ms()
                seed_engines(cursor, shape, now)
                seed_parked(cursor, first, last, shape, now)
                analyze(cursor)
            seeding[label] = stats.rnd(time.perf_counter() - t0, 2)
            print(f"# seeded {label}: {seeding[label]} s", file=sys.stderr, flush=True)
            if bench is None:
                bench = Bench(shape, n_small)
            histories[label] = {"rows": _counts(), "operations": measure(bench, reps)}
    finally:
        if bench is not None:
            bench.dispose()
    small_ops = histories["small"]["operations"]
    large_ops = histories["large"]["operations"]
    ratios = {
        name: stats.rnd(large_ops[name]["ms"] / small_ops[name]["ms"], 2) for name in OPERATIONS
    }
    worst = max(ratios, key=lambda n: ratios[n])
    # Beside the medians: the fastest repetition of each, less moved by other load.
    of_minimums = {
        name: stats.rnd(large_ops[name]["min_ms"] / small_ops[name]["min_ms"], 2)
        for name in OPERATIONS
    }
    pngs = [_plot(small_ops, large_ops, ratios, n_small, n_large, publish)]
    return common.document(
        "scale",
        mode="quick" if quick else "full",
        figures={
            "history": {"parked_workflows": n_large, "rows": histories["large"]["rows"]},
            "operations": large_ops,
            "seed_s": seeding,
        },
        baseline={
            "history": {"parked_workflows": n_small, "rows": histories["small"]["rows"]},
            "operations": small_ops,
        },
        ratio={
            **ratios,
            "headline": f"worst operation's cost at {n_large:,} ÷ at {n_small:,} parked "
            f"workflows ({worst})",
            "value": ratios[worst],
            "target": f"<= {TARGET} for each operation",
            "met": all(r <= TARGET for r in ratios.values()),
            "over_target": sorted(n for n, r in ratios.items() if r > TARGET),
            "of_minimums": of_minimums,
        },
        settings={
            "small": n_small,
            "large": n_large,
            "repetitions": reps,
            "claims_held_by_measured_engine": shape.held,
            "other_engines": shape.other_engines,
            "journal_per_run": shape.journal_per_run,
            "long_journal": shape.long_journal,
            "pickup_batch": PICKUP,
            "api_query": api_query(n_small),
            "timing": "wall clock, in-process, one connection; warm-up then the median",
            "database": url,
        },
        machine=machine,
        notes=[
            "The large history is the small one plus the rest (the same rows measured twice).",
            "Statements counted with CaptureQueriesContext: the same count in both histories "
            "means no per-row query crept in.",
            "The measured engine holds the same claims in both histories: renewal cost is "
            "per claim held, and a held claim is no history.",
        ],
        url=url,
        pngs=pngs,
    )


def _plot(
    small_ops: dict[str, Any],
    large_ops: dict[str, Any],
    ratios: dict[str, float],
    n_small: int,
    n_large: int,
    publish: bool,
) -> str:
    plt = common.pyplot()
    fig, ax = plt.subplots(figsize=(8, 4.2))
    xs = range(len(OPERATIONS))
    width = 0.38
    ax.bar(
        [x - width / 2 for x in xs],
        [small_ops[n]["ms"] for n in OPERATIONS],
        width,
        label=f"{n_small:,} parked workflows",
    )
    ax.bar(
        [x + width / 2 for x in xs],
        [large_ops[n]["ms"] for n in OPERATIONS],
        width,
        label=f"{n_large:,} parked workflows",
    )
    for x, name in zip(xs, OPERATIONS, strict=True):
        top = max(small_ops[name]["ms"], large_ops[name]["ms"])
        ax.annotate(f"×{ratios[name]:.2f}", (x, top), ha="center", va="bottom", fontsize=8)
    ax.set_xticks(list(xs), [n.replace("_", "\n") for n in OPERATIONS], fontsize=8)
    ax.set_yscale("log")
    ax.set_ylabel("ms per operation (median)")
    ax.set_title(f"Cost as history grows (target: large ÷ small ≤ {TARGET})")
    ax.grid(alpha=0.3, axis="y", which="both")
    ax.legend(fontsize=8)
    path = common.publish_png(fig, "scale", publish)
    plt.close(fig)
    return path


def main(argv: list[str] | None = None) -> int:
    parser = common.size_parser(__doc__)
    parser.add_argument("--small", type=int, default=None, help="parked workflows, baseline")
    parser.add_argument("--large", type=int, default=None, help="parked workflows, measured")
    parser.add_argument("--reps", type=int, default=None, help="repetitions per operation")
    args = parser.parse_args(argv)
    common.emit(
        run(
            quick=not args.full,
            publish=not args.no_publish,
            small=args.small,
            large=args.large,
            reps=args.reps,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
