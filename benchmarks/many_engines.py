"""Many engines: what an idle engine costs PostgreSQL at 1 and at N (50) engines,
polling and NOTIFY, and how fast N engines spread a burst of pending work.

For each wake mode -- ``polling`` (``weft_worker --no-listen``: a full
maintenance pass every POLL_INTERVAL, 0.2 s), ``polling_1s`` (the same with
``POLL_INTERVAL`` 1 s, the documented knob that bounds it) and ``notify``
(the default: LISTEN for NOTIFY wakes, polling backs off while nothing is
found) -- in one run:

1. **Baseline**: ONE idle ``weft_worker`` (small pool: ``--concurrency``
   CONCURRENCY), warmed up, then measured over WINDOW seconds.
2. **N engines**: N idle ``weft_worker``s booted in parallel (readiness =
   their ``EngineRecord`` rows), warmed up, then the same window. Per engine
   (÷ N): transactions/s (``pg_stat_database`` ``xact_commit +
   xact_rollback`` delta), statements/s and their execution time
   (``pg_stat_statements`` calls and ``total_exec_time`` deltas, when the
   extension is loaded; ``null`` and the reason when not; ``top_statements``:
   the eight costliest, the idle profile), the CPU
   of PostgreSQL (the engines' backends: ``/proc/<pid>/stat`` of the
   ``pg_stat_activity`` pids of the benchmark database, summed per pid; and
   the whole server: every pid ``pg_stat_activity`` shows plus the
   postmaster), the engines' own CPU, the connections each holds
   (``pg_stat_activity`` by ``application_name``, one name per engine) and
   its RSS (``VmRSS``). Ratio: per engine at N ÷ per engine at 1.
3. **Spread**: with the N engines up, RUNS ``bench-one`` workflows (one
   trivial activity) are started in ONE transaction (all pending at its
   commit, t0); figures: t0 → last ``finished_at``, the distinct engines
   that drove at least one (``JournalEntry.engine_id``), the runs each
   claimed and its first pickup after t0 (its first ``ClaimEvent``
   ``acquire``; p50/p99 over the engines), each run's finish after t0, and
   the takeovers (a claim that expired before its run was driven: each costs
   CLAIM_TTL + the takeover grace).

During a window this process sends nothing to the benchmark database: its
statistics connection is on the server's ``postgres`` database, so every
transaction counted is an engine's. N engines need about 6 × N + 10
connections: the run refuses (naming the figures) when the server's
``max_connections`` leaves fewer free. Not part of ``all`` (it boots
2 × (N + 1) engine processes). Every engine is stopped (its process group
killed after a grace) however the run ends, SIGTERM included.
"""

from __future__ import annotations

import os
import signal
import sys
import time
import uuid
from collections.abc import Sequence
from typing import Any

from benchmarks import children, common, stats
from benchmarks.cpu_split import machine_busy_s, postgres_cpu_delta_s, process_cpu_s
from benchmarks.memory import rss_kib
from devtools.procs import ChildGroup, wait_for

#: Wake mode -> (``weft_worker`` flags, environment). ``polling_1s``: the
#: documented knob that bounds a polling engine's idle cost (POLL_INTERVAL 1 s).
MODES: dict[str, tuple[tuple[str, ...], dict[str, str]]] = {
    "polling": (("--no-listen",), {}),
    "polling_1s": (("--no-listen",), {"WEFT_POLL_INTERVAL": "1"}),
    "notify": ((), {}),
}
CONCURRENCY = 1
#: (engines, window s, warm-up s, runs) of ``--quick`` and ``--full``.
SIZES = {"quick": (10, 10.0, 5.0, 100), "full": (50, 30.0, 10.0, 500)}
#: Sessions an engine may hold (poll, renewal, LISTEN, presence, a turn
#: thread, an activity thread); the pre-flight check asks for this many.
CONNECTIONS_PER_ENGINE = 6
FIGURES = (
    "xact_per_s",
    "statements_per_s",
    "postgres_backend_cpu_ms_per_s",
    "postgres_server_cpu_ms_per_s",
    "engine_cpu_ms_per_s",
    "connections",
    "rss_mib",
)


# -- the server's counters, read from the ``postgres`` database ---------------------


class Probe:
    """Counters of the benchmark database read over a connection to another one."""

    def __init__(self) -> None:
        self.db = common.pg_params()["dbname"]
        self.conn = common.pg_connect(dbname="postgres")
        self.statements_reason = self._statements_available()

    def _statements_available(self) -> str | None:
        """``None`` when ``pg_stat_statements`` can be read, else why not."""
        loaded = str(self.conn.execute("SHOW shared_preload_libraries").fetchone()[0])
        if "pg_stat_statements" not in loaded:
            return "pg_stat_statements is not in shared_preload_libraries"
        try:
            self.conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
            self.conn.execute("SELECT 1 FROM pg_stat_statements LIMIT 1")
        except Exception as exc:
            return f"pg_stat_statements unreadable: {exc}"
        return None

    def statements(self) -> dict[str, tuple[int, float]] | None:
        """(calls, execution ms) by query text of the benchmark database
        (``None``: unavailable)."""
        if self.statements_reason is not None:
            return None
        rows = self.conn.execute(
            "SELECT s.query, sum(s.calls), sum(s.total_exec_time) FROM pg_stat_statements s "
            "JOIN pg_database d ON d.oid = s.dbid WHERE d.datname = %s GROUP BY s.query",
            [self.db],
        ).fetchall()
        return {str(q): (int(c), float(t)) for q, c, t in rows}

    def xacts(self) -> dict[str, int]:
        self.conn.execute("SELECT pg_stat_clear_snapshot()")
        row = self.conn.execute(
            "SELECT xact_commit + xact_rollback, sessions FROM pg_stat_database WHERE datname = %s",
            [self.db],
        ).fetchone()
        return {"xacts": int(row[0]), "sessions": int(row[1])}

    def activity(self) -> list[tuple[int, str | None, str | None]]:
        """(pid, database, application_name) of every process the server shows."""
        rows = self.conn.execute(
            "SELECT pid, datname, application_name FROM pg_stat_activity WHERE pid IS NOT NULL"
        ).fetchall()
        return [(int(p), d, a) for p, d, a in rows]

    def snapshot(self) -> dict[str, Any]:
        procs = self.activity()
        backends = [p for p, d, _ in procs if d == self.db]
        server = {p for p, _, _ in procs} | {_ppid(p) for p, _, _ in procs} - {0, 1}
        return {
            "t": time.monotonic(),
            **self.xacts(),
            "statements": self.statements(),
            "backend_cpu": {p: process_cpu_s(p) for p in backends},
            "server_cpu": {p: process_cpu_s(p) for p in server},
            "apps": [a for _, d, a in procs if d == self.db],
        }


def _ppid(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return int(stat.read().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return 0


def free_connections(probe: Probe) -> tuple[int, int]:
    """(max_connections minus reserved, connections in use) of the server."""
    limit = int(probe.conn.execute("SHOW max_connections").fetchone()[0])
    reserved = int(probe.conn.execute("SHOW superuser_reserved_connections").fetchone()[0])
    return limit - reserved, len(probe.activity())


# -- one idle window ----------------------------------------------------------------


def measure_idle(
    probe: Probe, workers: Sequence[ChildGroup], names: Sequence[str], window_s: float
) -> dict[str, Any]:
    """The window's figures, each ÷ the number of engines."""
    n = len(workers)
    pids = [w.pid for w in workers]
    engine_before = [process_cpu_s(p) for p in pids]
    busy_before = machine_busy_s()
    before = probe.snapshot()
    time.sleep(window_s)  # the measurement itself: nothing else runs on the database
    after = probe.snapshot()
    engine_after = [process_cpu_s(p) for p in pids]
    busy = machine_busy_s() - busy_before
    span = after["t"] - before["t"]
    per = 1 / (span * n)
    held = [after["apps"].count(name) for name in names]
    statements: float | None = None
    exec_ms: float | None = None
    top: list[dict[str, Any]] = []
    if before["statements"] is not None and after["statements"] is not None:
        earlier = before["statements"]
        delta = {
            q: (c - earlier.get(q, (0, 0.0))[0], t - earlier.get(q, (0, 0.0))[1])
            for q, (c, t) in after["statements"].items()
            if c > earlier.get(q, (0, 0.0))[0]
        }
        statements = sum(c for c, _ in delta.values()) * per
        exec_ms = sum(t for _, t in delta.values()) * per
        top = [
            {
                "calls_per_s_per_engine": round(c * per, 3),
                "exec_ms_per_s_per_engine": round(t * per, 4),
                "query": " ".join(q.split())[:160],
            }
            for q, (c, t) in sorted(delta.items(), key=lambda kv: -kv[1][1])[:8]
        ]
    engine_cpu = [b - a for a, b in zip(engine_before, engine_after, strict=True)]
    rss = [rss_kib(p) / 1024 for p in pids]
    return {
        "engines": n,
        "window_s": round(span, 2),
        "xact_per_s": round((after["xacts"] - before["xacts"]) * per, 3),
        "statements_per_s": stats.rnd(statements),
        "statement_exec_ms_per_s": stats.rnd(exec_ms, 4),
        "sessions_opened_per_s": round((after["sessions"] - before["sessions"]) * per, 4),
        "postgres_backend_cpu_ms_per_s": round(
            1000 * postgres_cpu_delta_s(before["backend_cpu"], after["backend_cpu"]) * per, 3
        ),
        "postgres_server_cpu_ms_per_s": round(
            1000 * postgres_cpu_delta_s(before["server_cpu"], after["server_cpu"]) * per, 3
        ),
        "engine_cpu_ms_per_s": round(1000 * sum(engine_cpu) * per, 3),
        "engine_cpu_ms_per_s_max": round(1000 * max(engine_cpu) / span, 3),
        "connections": round(sum(held) / n, 2),
        "connections_max": max(held),
        "connections_unattributed": len(after["apps"]) - sum(held),
        "rss_mib": round(sum(rss) / n, 1),
        "rss_mib_max": round(max(rss), 1),
        "machine_busy_share": round(busy / ((os.cpu_count() or 1) * span), 3),
        "top_statements": top,
    }


# -- engines ------------------------------------------------------------------------


def boot(
    n: int, tag: str, extra: Sequence[str], env: dict[str, str], timeout: float
) -> list[ChildGroup]:
    """N ``weft_worker``s spawned at once (they boot in parallel); returns when
    every one has its ``EngineRecord``. On failure the started ones are stopped."""
    from django.db import connections

    from weft_django.models import EngineRecord

    names = [f"{tag}-{i}" for i in range(n)]
    workers: list[ChildGroup] = []
    try:
        for name in names:
            flags = ("--concurrency", str(CONCURRENCY), *extra)
            workers.append(children.weft_worker(name, *flags, env=env))
        wait_for(
            f"{n} engines to boot",
            lambda: EngineRecord.objects.filter(engine_id__in=names, stopped_at=None).count() >= n,
            *workers,
            timeout=timeout,
            interval=0.5,
        )
    except BaseException:
        children.stop_all(workers)
        raise
    finally:
        connections.close_all()  # nothing of this process stays on the database
    return workers


def spread(workers: Sequence[ChildGroup], runs: int, tag: str) -> dict[str, Any]:
    """RUNS pending at one commit; how the N engines share them out."""
    from django.db import connections, transaction
    from django.db.models import Count, Min

    from weft_django import client
    from weft_django.models import ClaimEvent, JournalEntry, WorkflowRun

    with transaction.atomic():
        for i in range(runs):
            client.start("bench-one", {"i": i}, workflow_id=f"{tag}-{i}")
    t0_ms = time.time() * 1000
    ours = WorkflowRun.objects.filter(workflow_id__startswith=f"{tag}-")

    def done() -> bool:
        bad = ours.filter(status__in=("failed", "cancelled", "timed_out", "suspended"))
        if bad.exists():
            raise RuntimeError(f"a run did not complete: {bad.first()}")
        return ours.filter(status="completed").count() >= runs

    wait_for(f"{runs} runs to complete", done, *workers, timeout=120 + runs, interval=0.1)
    finished_s = [
        (f.timestamp() * 1000 - t0_ms) / 1000
        for f in ours.values_list("finished_at", flat=True)
        if f is not None  # every run is completed by now: never None
    ]
    takeovers = [
        {
            "workflow_id": t["workflow_id"],
            "from_engine": t["previous_engine_id"],
            "at_s": round((t["at_ms"] - t0_ms) / 1000, 3),
        }
        for t in ClaimEvent.objects.filter(kind="takeover", workflow_id__startswith=f"{tag}-")
        .order_by("id")
        .values("workflow_id", "previous_engine_id", "at_ms")
    ]
    claims = list(
        ClaimEvent.objects.filter(kind="acquire", workflow_id__startswith=f"{tag}-")
        .values("engine_id")
        .annotate(first=Min("at_ms"), runs=Count("workflow_id", distinct=True))
    )
    drove = (
        JournalEntry.objects.filter(run__workflow_id__startswith=f"{tag}-")
        .exclude(engine_id="")
        .values("engine_id")
        .distinct()
        .count()
    )
    connections.close_all()
    n = len(workers)
    return {
        "runs": runs,
        "engines": n,
        "all_complete_s": round(max(finished_s), 3),
        "finished_s": stats.distribution(finished_s, 3),
        "takeovers": len(takeovers),
        "takeover_detail": takeovers[:20],
        "engines_that_drove": drove,
        "engines_that_claimed": len(claims),
        "first_pickup_ms": stats.distribution([c["first"] - t0_ms for c in claims]),
        "runs_claimed_per_engine": stats.distribution(
            [c["runs"] for c in claims] + [0] * (n - len(claims))
        ),
    }


def run_mode(
    mode: str, probe: Probe, sizes: tuple[int, float, float, int], runs: int
) -> dict[str, Any]:
    """The baseline (one engine), then N engines: idle window and spread."""
    n, window_s, warmup_s, _ = sizes
    extra, env = MODES[mode]
    boot_timeout = 120 + 6 * n
    out: dict[str, Any] = {}
    for count in (1, n):
        common.reset_tables()
        tag = f"me-{mode[0]}{count}-{uuid.uuid4().hex[:4]}"
        started = time.monotonic()
        print(f"# {mode}: booting {count} engine(s)", file=sys.stderr, flush=True)
        workers = boot(count, tag, extra, env, boot_timeout)
        try:
            booted_s = round(time.monotonic() - started, 1)
            time.sleep(warmup_s)  # boot CPU settles, the NOTIFY engines' cadence backs off
            idle = measure_idle(probe, workers, [w.name for w in workers], window_s)
            idle["boot_s"] = booted_s
            out[f"{count}_engines" if count > 1 else "1_engine"] = {"idle": idle}
            print(f"# {mode} idle x{count}: {idle['xact_per_s']} xact/s/engine", file=sys.stderr)
            if count == n:
                out[f"{count}_engines"]["spread"] = spread(workers, runs, f"{tag}-run")
                after = probe.snapshot()["apps"]
                out[f"{count}_engines"]["connections_after_spread"] = round(
                    sum(after.count(w.name) for w in workers) / count, 2
                )
        finally:
            children.stop_all(workers)
    return out


def command(wake: str) -> str:
    """The engine command line of a wake mode, its environment first."""
    flags, env = MODES[wake]
    words = [f"{k}={v}" for k, v in env.items()]
    return " ".join([*words, "weft_worker", "--concurrency", str(CONCURRENCY), *flags])


def ratios(one: dict[str, Any], many: dict[str, Any]) -> dict[str, float | None]:
    """Per engine at N ÷ per engine at 1, figure by figure."""
    return {
        k: (round(many[k] / one[k], 3) if one.get(k) and many.get(k) is not None else None)
        for k in FIGURES
    }


def run(
    sizes: tuple[int, float, float, int],
    *,
    mode: str,
    modes: Sequence[str] = tuple(MODES),
    publish: bool = True,
) -> dict[str, Any]:
    machine = common.Machine()
    url = common.bench_url()
    common.ensure_database(url)
    common.setup_django(url)
    n, window_s, warmup_s, runs = sizes
    probe = Probe()
    limit, used = free_connections(probe)
    needed = CONNECTIONS_PER_ENGINE * n + 10
    if limit - used < needed:
        raise SystemExit(
            f"{n} engines need about {needed} connections; the server at {url} has "
            f"max_connections - superuser_reserved_connections = {limit} and {used} in use: "
            "raise max_connections or run on a server of its own (benchmarks/README.md)"
        )
    figures: dict[str, Any] = {}
    ratio: dict[str, Any] = {}
    for wake in modes:
        figures[wake] = run_mode(wake, probe, sizes, runs)
        ratio[wake] = ratios(
            figures[wake]["1_engine"]["idle"], figures[wake][f"{n}_engines"]["idle"]
        )
    head = next((m for m in ("notify", "polling") if m in ratio), modes[0])
    ratio["headline"] = {
        "headline": f"{head}: PostgreSQL transactions/s per idle engine at {n} ÷ at 1",
        "value": ratio[head]["xact_per_s"],
    }
    pngs = [_plot(figures, n, publish)]
    probe.conn.close()
    return common.document(
        "many_engines",
        mode=mode,
        figures=figures,
        baseline={w: figures[w]["1_engine"]["idle"] for w in modes},
        ratio=ratio,
        settings={
            "engines": n,
            "window_s": window_s,
            "warmup_s": warmup_s,
            "spread_runs": runs,
            "modes": {w: command(w) for w in modes},
            "weft": "defaults otherwise: POLL_INTERVAL 0.2 s, CLAIM_RENEW_INTERVAL 5 s, "
            "SESSION_PRESENCE on, ACTIVITY_CONCURRENCY 16",
            "pg_stat_statements": probe.statements_reason or "available",
            "database": url,
        },
        machine=machine,
        notes=[
            common.TWO_CORE_NOTE.format(nproc=os.cpu_count()),
            "Every idle figure is per engine: the window's delta ÷ its seconds ÷ engines. "
            "xact_per_s counts every transaction of the benchmark database (an autocommit "
            "SELECT is one); this process's statistics connection is on the postgres "
            "database, so none of them is the benchmark's own.",
            "PostgreSQL publishes a backend's counters at most once a second (an idle one "
            "within 10 s): the window's ends lag alike, so a steady rate is unbiased.",
            "postgres_backend_cpu: the CPU of the benchmark database's backends (the "
            "engines' sessions), summed per pid (a backend that exits in the window is "
            "not counted); postgres_server_cpu adds the server's own processes (WAL "
            "writer, checkpointer, autovacuum, stats) and any other database's sessions.",
            "connections: sessions per engine (pg_stat_activity by application_name) at "
            "the window's end; connections_after_spread: again once the burst is done.",
            "spread: RUNS started in one transaction (pending at its commit, t0); "
            "first_pickup_ms: each engine's first claim (ClaimEvent acquire) after t0; "
            "finished_s: each run's finished_at after t0; takeovers: claims another "
            "engine took over once they expired (CLAIM_TTL 30 s + grace 10 s), which "
            "all_complete_s then includes.",
        ],
        url=url,
        pngs=pngs,
    )


def _plot(figures: dict[str, Any], n: int, publish: bool) -> str:
    plt = common.pyplot()
    panels = (
        ("xact_per_s", "PostgreSQL transactions / s"),
        ("postgres_backend_cpu_ms_per_s", "PostgreSQL backend CPU ms / s"),
        ("engine_cpu_ms_per_s", "engine process CPU ms / s"),
    )
    fig, axes = plt.subplots(1, len(panels), figsize=(11, 3.6))
    wakes = list(figures)
    for ax, (key, label) in zip(axes, panels, strict=True):
        for j, (count, name) in enumerate(((1, "1_engine"), (n, f"{n}_engines"))):
            values = [figures[w][name]["idle"][key] for w in wakes]
            xs = [i + (j - 0.5) * 0.38 for i in range(len(wakes))]
            ax.bar(xs, values, width=0.36, label=f"{count} engine{'s' if count > 1 else ''}")
        ax.set_xticks(range(len(wakes)))
        ax.set_xticklabels(wakes)
        ax.set_title(f"{label}\nper idle engine", fontsize=9)
        ax.grid(alpha=0.3, axis="y")
    axes[0].legend(fontsize=8)
    title = f"Idle cost per engine: 1 vs {n} engines ({os.cpu_count()} cores)"
    fig.suptitle(title, fontsize=10, y=1.04)
    path = common.publish_png(fig, "many-engines", publish)
    plt.close(fig)
    return path


def main(argv: list[str] | None = None) -> int:
    parser = common.size_parser(__doc__)
    parser.add_argument("--engines", type=int, default=None, help="N (default 10; --full 50)")
    parser.add_argument("--window", type=float, default=None, help="idle window, seconds")
    parser.add_argument("--warmup", type=float, default=None, help="seconds before a window")
    parser.add_argument("--runs", type=int, default=None, help="workflows of the spread")
    parser.add_argument(
        "--modes", default=",".join(MODES), help=f"comma-separated (default {','.join(MODES)})"
    )
    args = parser.parse_args(argv)
    mode = "full" if args.full else "quick"
    n, window_s, warmup_s, runs = SIZES[mode]
    sizes = (
        args.engines or n,
        args.window or window_s,
        warmup_s if args.warmup is None else args.warmup,
        args.runs or runs,
    )
    if sizes[0] < 2 or sizes[1] <= 0 or sizes[3] < 1:
        parser.error(f"--engines {sizes[0]} (>= 2), --window {sizes[1]} (> 0), --runs {sizes[3]}")
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    unknown = [m for m in modes if m not in MODES]
    if unknown or not modes:
        parser.error(f"--modes {args.modes!r}: each must be one of {', '.join(MODES)}")
    # A SIGTERM unwinds like an error, so every engine's group is stopped.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    common.emit(run(sizes, mode=mode, modes=modes, publish=not args.no_publish))
    return 0


if __name__ == "__main__":
    sys.exit(main())
