"""Workflow throughput: "three-steps" with 1, 2 and 4 engines, polling and Celery.

For each engine count, in one run and interleaved (pgbench, ours per
transport, DBOS):

- **Ours, polling** (``--transport polling``): N ``manage.py weft_worker``
  processes (the polling transport with its default settings: POLL_INTERVAL
  0.2 s, WORKER_CONCURRENCY 4, and LISTEN for NOTIFY wakes, as on PostgreSQL
  by default) are booted and idle; then a producer in this process calls
  ``client.start("three-steps", …)`` RUNS times from PRODUCER_THREADS
  threads (the web process's part), and the benchmark waits until every run
  is ``completed``. Throughput = RUNS ÷ (last ``finished_at`` − first
  ``created_at``); start→complete latency = ``finished_at − created_at`` of
  each run (p50/p99).
- **Ours, Celery** (``--transport celery``): the same with N Celery nodes
  (``celery -A project worker -P prefork -c 2``: one weft engine per node,
  turns in its pool processes; broker Redis, ``children.broker_url()``). This
  process installs the transport for the run's length, so each
  ``client.start`` sends ``weft.pickup`` once it commits, as a web process
  of a Celery deployment does. ``--transport all`` (the default) runs both.
- **Commits per workflow**: the exact counter of
  ``benchmarks/commits_per_workflow.py`` (write commits of one workflow from
  ``client.start`` to completion, activity statements excluded), and
  ``pg_stat_database.xact_commit`` delta ÷ RUNS over the window (every
  committed transaction in the database: the producer's, the engines' reads,
  polls and heartbeats, the activities' own inserts).
- **Baseline** (the limit of the design): ``pgbench`` with a custom script
  ``UPDATE t SET v = v + 1 WHERE id = :id`` (random id among 10,000 rows),
  N clients, tps ÷ (exact write commits per workflow) = the workflows/s a
  design that needs that many single-row commits per workflow could reach.
  Target: ours ≥ 25 % of that limit.
- **Peer**: DBOS (``pip install dbos`` into ``benchmarks/.venv-dbos``, not a
  project dependency) runs the same three-step workflow (three steps, each
  writing one side-effect row) on the same PostgreSQL server, database
  ``dbos_bench``: N DBOS executor processes dequeue from one queue (polling
  0.2 s like ours), a ``DBOSClient`` producer enqueues RUNS workflows from
  the same number of threads. Same figures; commits per workflow from its
  ``xact_commit`` delta and an exact write-commit counter on DBOS's own
  SQLAlchemy engine (``benchmarks/dbos_peer.py``). Target: ours ÷ DBOS ≥ 2.

Over 400 lines on purpose: one benchmark (its cases, their baselines, the chart) read
top to bottom; the shared parts live in ``common``, ``stats`` and ``children``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks import children, common, stats
from devtools.procs import ChildGroup, wait_for

COUNTS = (1, 2, 4)
TRANSPORTS = ("polling", "celery")
PRODUCER_THREADS = 2
PGBENCH_ROWS = 10_000
LIMIT_TARGET = 0.25
PEER_TARGET = 2.0
DBOS_DB = os.environ.get("WEFT_BENCH_DBOS_DB", "dbos_bench")  # the DBOS system database
DBOS_POLL_S = 0.2  # = our POLL_INTERVAL
DBOS_PEER = common.REPO_ROOT / "benchmarks" / "dbos_peer.py"


# -- helpers ---------------------------------------------------------------------------


def _stats_delta(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    delta = {k: after[k] - before[k] for k in before}
    delta["xact_commit"] -= stats.STATS_OVERHEAD
    return delta


def _summary(
    runs: int, created_ms: list[float], finished_ms: list[float], delta: dict[str, int]
) -> dict[str, Any]:
    window_s = (max(finished_ms) - min(created_ms)) / 1000
    latencies = [f - c for c, f in zip(created_ms, finished_ms, strict=True)]
    return {
        "runs": runs,
        "window_s": round(window_s, 2),
        "workflows_per_s": round(runs / window_s, 2),
        "start_to_complete_ms": stats.distribution(latencies),
        "xact_commit_per_workflow": round(delta["xact_commit"] / runs, 2),
        "sessions_per_workflow": round(delta["sessions"] / runs, 3),
        "xact_rollback": delta["xact_rollback"],
    }


# -- pgbench ---------------------------------------------------------------------------


def pgbench_binary() -> str | None:
    found = shutil.which("pgbench")
    if found:
        return found
    for candidate in sorted(Path("/usr/lib/postgresql").glob("*/bin/pgbench")):
        return str(candidate)
    return None


def prepare_pgbench() -> Path:
    with common.pg_connect() as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS t (id integer PRIMARY KEY, v bigint NOT NULL)")
        conn.execute("TRUNCATE t")
        conn.execute("INSERT INTO t SELECT g, 0 FROM generate_series(1, %s) g", [PGBENCH_ROWS])
        conn.execute("VACUUM ANALYZE t")
    script = common.OUT_DIR / "pgbench_update.sql"
    script.parent.mkdir(parents=True, exist_ok=True)
    script.write_text(
        f"\\set id random(1, {PGBENCH_ROWS})\nUPDATE t SET v = v + 1 WHERE id = :id;\n"
    )
    return script


def run_pgbench(binary: str, script: Path, clients: int, seconds: int) -> dict[str, Any]:
    p = common.pg_params()
    argv = [
        binary,
        "-n",
        "-c",
        str(clients),
        "-j",
        str(clients),
        "-T",
        str(seconds),
        "-f",
        str(script),
        "-h",
        p["host"],
        "-p",
        str(p["port"]),
        "-U",
        p["user"],
        p["dbname"],
    ]
    out = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
    tps = None
    for line in out.splitlines():
        if line.startswith("tps ="):
            tps = float(line.split("=", 1)[1].split()[0])
    assert tps is not None, out
    return {"clients": clients, "seconds": seconds, "tps": round(tps, 1)}


# -- ours --------------------------------------------------------------------------------


def exact_commits(samples: int) -> dict[str, Any]:
    """The exact counter of ``benchmarks/commits_per_workflow.py`` (its own method)."""
    from django.db import connections

    from benchmarks.commits_per_workflow import METHOD, measure_three_steps
    from weft_django.conf import get_settings
    from weft_django.engine import Engine
    from weft_django.testing import FakeClock

    connection = connections[get_settings().database]
    engine = Engine(clock=FakeClock(), background_tasks="manual")
    try:
        runs = [
            measure_three_steps(engine, connection, f"cpw-{uuid.uuid4().hex[:12]}")
            for _ in range(samples)
        ]
    finally:
        engine.dispose(grace=0)
    assert all(r["status"] == "completed" for r in runs), runs
    return {
        "write_commits": max(r["write_commits"] for r in runs),
        "per_run": [r["write_commits"] for r in runs],
        "write_commit_tables": runs[-1]["write_commit_tables"],
        "all_commits_incl_reads": runs[-1]["all_commits"],
        "pg_stat_xact_commit_delta": runs[-1]["pg_stat_xact_commit_delta"],
        "reconnects": runs[-1]["reconnects"],
        "method": METHOD,
    }


def produce(runs: int, prefix: str) -> float:
    """``client.start`` RUNS times from PRODUCER_THREADS threads; returns seconds."""
    from concurrent.futures import ThreadPoolExecutor

    from django.db import connections

    from weft_django import client

    def chunk(k: int) -> None:
        try:
            for i in range(k, runs, PRODUCER_THREADS):
                wid = f"{prefix}-{i}"
                client.start("three-steps", {"id": wid}, workflow_id=wid)
        finally:
            connections.close_all()

    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=PRODUCER_THREADS) as pool:
        list(pool.map(chunk, range(PRODUCER_THREADS)))
    return time.perf_counter() - started


def key(transport: str, n: int) -> str:
    """The figures' key of one configuration (``1_engines`` kept for polling)."""
    return f"{n}_engines" if transport == "polling" else f"{n}_celery_nodes"


def start_engines(transport: str, n: int, tag: str, extra: Sequence[str] = ()) -> list[ChildGroup]:
    """N booted, idle engines: ``weft_worker``s (``extra``: more of its flags)
    or Celery nodes (one engine each)."""
    from weft_django.models import EngineRecord

    if transport == "celery":
        children.flush_broker()
        nodes = [children.celery_node(f"bench-{tag}-{i}") for i in range(n)]
        children.wait_celery_ready(nodes)
        return nodes
    workers = [children.weft_worker(f"bench-{tag}-{i}", *extra) for i in range(n)]
    wait_for(
        f"{n} engines to boot",
        lambda: EngineRecord.objects.filter(stopped_at__isnull=True).count() >= n,
        *workers,
        timeout=120,
        interval=0.05,
    )
    return workers


def run_ours(
    n: int, runs: int, stats_conn: Any, transport: str = "polling", extra: Sequence[str] = ()
) -> dict[str, Any]:
    """One configuration; with Celery this process plays the web process (its
    ``client.start`` sends ``weft.pickup`` on commit) for the run's length only."""
    from django.db import connections

    from weft_django.models import EngineRecord, WorkflowRun

    common.reset_tables()
    connections.close_all()
    tag = f"tp{transport[0]}{n}-{uuid.uuid4().hex[:6]}"
    workers: list[ChildGroup] = []
    app = children.install_celery() if transport == "celery" else None
    try:
        workers = start_engines(transport, n, tag, extra)
        time.sleep(0.5)
        before = stats.db_stats(stats_conn)
        produce_s = produce(runs, tag)

        def done() -> bool:
            bad = WorkflowRun.objects.filter(status__in=("failed", "cancelled", "timed_out"))
            if bad.exists():
                raise RuntimeError(f"a run did not complete: {bad.first()}")
            return WorkflowRun.objects.filter(status="completed").count() >= runs

        wait_for(f"{runs} runs to complete", done, *workers, timeout=60 + runs, interval=0.1)
        after = stats.db_stats(stats_conn)
    finally:
        children.stop_all(workers)
        if app is not None:
            children.uninstall_celery(app)
    rows = list(WorkflowRun.objects.values_list("created_at", "finished_at"))
    attempts: dict[str, int] = {}
    for metrics in EngineRecord.objects.values_list("metrics", flat=True):
        for outcome, count in ((metrics or {}).get("attempts") or {}).items():
            attempts[outcome] = attempts.get(outcome, 0) + int(count)
    connections.close_all()
    created = [c.timestamp() * 1000 for c, _ in rows]
    finished = [f.timestamp() * 1000 for _, f in rows]
    summary = _summary(runs, created, finished, _stats_delta(before, after))
    summary["producer_s"] = round(produce_s, 2)
    summary["producer_per_s"] = round(runs / produce_s, 1)
    summary["claim_attempts"] = attempts  # summed EngineRecord.metrics of the engines
    return summary


# -- DBOS --------------------------------------------------------------------------------


def dbos_python() -> Path:
    return common.DBOS_VENV / "bin" / "python"


def dbos_available() -> tuple[bool, str]:
    py = dbos_python()
    if not py.exists():
        return False, (
            f"{py} does not exist: create it with `python3 -m venv {common.DBOS_VENV}` "
            f"and `{common.DBOS_VENV}/bin/pip install dbos`"
        )
    probe = subprocess.run(
        [str(py), "-c", "import dbos, importlib.metadata as m; print(m.version('dbos'))"],
        capture_output=True,
        text=True,
    )
    if probe.returncode != 0:
        return False, f"`import dbos` failed in {common.DBOS_VENV}: {probe.stderr.strip()[-500:]}"
    return True, probe.stdout.strip()


def dbos_url() -> str:
    return common.with_database(common.bench_url(), DBOS_DB).replace(
        "postgres://", "postgresql://", 1
    )


def prepare_dbos() -> None:
    common.create_database(DBOS_DB, drop=True)
    with common.pg_connect(dbname=DBOS_DB) as conn:
        conn.execute(
            "CREATE TABLE bench_side_effect (id bigserial PRIMARY KEY, kind text NOT NULL, "
            "key text NOT NULL, at timestamptz NOT NULL DEFAULT clock_timestamp())"
        )
    # One launch creates DBOS's system schema, so no timed phase pays for migrations.
    worker = _dbos_worker("dbos-migrate", concurrency=0)
    try:
        _wait_ready([worker])
    finally:
        worker.stop()


def _dbos_worker(name: str, concurrency: int, poll: float = DBOS_POLL_S) -> ChildGroup:
    argv = [
        str(dbos_python()),
        str(DBOS_PEER),
        "worker",
        "--url",
        dbos_url(),
        "--executor",
        name,
        "--poll",
        str(poll),
        "--worker-concurrency",
        str(concurrency),
    ]
    return children.spawn(name, argv, dict(os.environ), capture=True)


def _wait_ready(workers: list[ChildGroup]) -> None:
    wait_for(
        "DBOS executors to launch",
        lambda: all(any(line.startswith("ready") for line in w.lines) for w in workers),
        *workers,
        timeout=120,
        interval=0.05,
    )


def run_dbos(n: int, runs: int, concurrency: int, poll: float = DBOS_POLL_S) -> dict[str, Any]:
    with common.pg_connect(dbname=DBOS_DB) as conn:
        conn.execute("TRUNCATE dbos.workflow_status CASCADE")
        conn.execute("TRUNCATE bench_side_effect")
    stats_conn = common.pg_connect(dbname=DBOS_DB)
    tag = f"dbos{n}-{uuid.uuid4().hex[:6]}"
    workers = [_dbos_worker(f"{tag}-{i}", concurrency, poll) for i in range(n)]
    counters: list[dict[str, Any] | None] = []
    try:
        _wait_ready(workers)
        time.sleep(0.5)
        before = stats.db_stats(stats_conn)
        producer = children.spawn(
            f"{tag}-enqueue",
            [
                str(dbos_python()),
                str(DBOS_PEER),
                "enqueue",
                "--url",
                dbos_url(),
                "--runs",
                str(runs),
                "--prefix",
                tag,
                "--threads",
                str(PRODUCER_THREADS),
            ],
            dict(os.environ),
            capture=True,
        )
        wait_for(
            "the DBOS producer",
            lambda: producer.proc.poll() is not None,
            timeout=60 + runs,
            interval=0.05,
        )
        produced = producer.output_json() or {}
        if producer.proc.returncode != 0:
            raise RuntimeError(f"DBOS enqueue failed:\n{producer.log()[-3000:]}")

        def done() -> bool:
            row = stats_conn.execute(
                "SELECT count(*) FILTER (WHERE status = 'SUCCESS'), "
                "count(*) FILTER (WHERE status IN ('ERROR', 'CANCELLED', "
                "'MAX_RECOVERY_ATTEMPTS_EXCEEDED')) FROM dbos.workflow_status"
            ).fetchone()
            if row[1]:
                raise RuntimeError(f"{row[1]} DBOS workflows failed")
            return bool(row[0] >= runs)

        wait_for(f"{runs} DBOS workflows", done, *workers, timeout=60 + runs, interval=0.1)
        after = stats.db_stats(stats_conn)
    finally:
        for w in workers:
            w.stop()
            counters.append(w.output_json())
    rows = stats_conn.execute(
        "SELECT created_at, COALESCE(completed_at, updated_at) FROM dbos.workflow_status "
        "WHERE status = 'SUCCESS'"
    ).fetchall()
    stats_conn.close()
    summary = _summary(
        runs, [r[0] for r in rows], [r[1] for r in rows], _stats_delta(before, after)
    )
    summary["producer_s"] = produced.get("enqueue_s")
    if summary["producer_s"]:
        summary["producer_per_s"] = round(runs / summary["producer_s"], 1)
    writes = [c["write_commits"] for c in counters if c]
    summary["write_commits_per_workflow_engine_side"] = (
        round(sum(writes) / runs, 2) if len(writes) == n else None
    )
    summary["write_commits_note"] = (
        "DBOS executors' write commits (SQLAlchemy events on its system-database engine) "
        "÷ runs; the enqueue (1 write commit per workflow, by the client) is not included"
    )
    return summary


# -- the benchmark ----------------------------------------------------------------------


def run(
    quick: bool,
    publish: bool = True,
    dbos_concurrency: int = 0,
    runs: int | None = None,
    transports: tuple[str, ...] = TRANSPORTS,
    counts: tuple[int, ...] = COUNTS,
    peer: bool = True,
    pg_seconds: int | None = None,
) -> dict[str, Any]:
    machine = common.Machine()
    url = common.bench_url()
    common.ensure_database(url)
    common.setup_django(url)
    # --quick: 100 runs per configuration (it was 300 before the Celery
    # configurations joined; the whole --quick run must stay under 5 minutes).
    runs = runs or (100 if quick else 2_000)
    pg_seconds = pg_seconds or (3 if quick else 15)
    notes: list[str] = [common.TWO_CORE_NOTE.format(nproc=os.cpu_count())]
    common.reset_tables()
    exact = exact_commits(2 if quick else 5)
    cpw = exact["write_commits"]

    binary = pgbench_binary()
    script = prepare_pgbench() if binary else None
    if not binary:
        notes.append("pgbench not found (apt-get install postgresql-contrib): no limit baseline")
    ok, dbos_info = dbos_available() if peer else (False, "not run (--no-peer)")
    dbos_error: str | None = None if ok else dbos_info
    if ok:
        try:
            prepare_dbos()
        except Exception as exc:  # report exactly why, keep the rest
            dbos_error = f"DBOS could not be launched: {type(exc).__name__}: {exc}"[:2000]
    stats_conn = common.pg_connect()
    ours: dict[str, dict[int, dict[str, Any]]] = {t: {} for t in transports}
    dbos: dict[int, dict[str, Any]] = {}
    pgb: dict[int, dict[str, Any]] = {}
    for n in counts:
        if binary and script:
            pgb[n] = run_pgbench(binary, script, n, pg_seconds)
        for transport in transports:
            ours[transport][n] = run_ours(n, runs, stats_conn, transport)
        if dbos_error is None:
            try:
                dbos[n] = run_dbos(n, runs, dbos_concurrency)
            except Exception as exc:
                dbos_error = f"DBOS run with {n} executors failed: {type(exc).__name__}: {exc}"
                dbos_error = dbos_error[:3000]
    stats_conn.close()
    common.reset_tables()

    figures: dict[str, Any] = {"commits_per_workflow_exact": exact}
    for transport in transports:
        figures.update({key(transport, n): ours[transport][n] for n in counts})
    baseline: dict[str, Any] = {}
    ratio: dict[str, Any] = {}
    for n in counts:
        if n in pgb:
            limit = pgb[n]["tps"] / cpw
            baseline[f"{n}_engines"] = {
                "pgbench": pgb[n],
                "commits_per_workflow": cpw,
                "limit_workflows_per_s": round(limit, 1),
            }
        for transport in transports:
            k = key(transport, n)
            got = ours[transport][n]["workflows_per_s"]
            if n in pgb:
                ratio[f"{k}_vs_limit"] = round(
                    got / baseline[f"{n}_engines"]["limit_workflows_per_s"], 4
                )
            if n in dbos:
                ratio[f"{k}_vs_dbos"] = round(got / dbos[n]["workflows_per_s"], 3)
    top = max(counts)
    headline: dict[str, Any] = {}
    for transport in transports:
        k = key(transport, top)
        label = "" if transport == "polling" else "celery_"
        engines = f"{top} {'Celery nodes' if transport == 'celery' else 'engines'}"
        if f"{k}_vs_limit" in ratio:
            value = ratio[f"{k}_vs_limit"]
            headline[f"{label}vs_limit"] = {
                "what": f"ours ({transport}) ÷ (pgbench tps ÷ commits per workflow) at {engines}",
                "value": value,
                "target": f">= {LIMIT_TARGET}",
                "met": value >= LIMIT_TARGET,
            }
        if f"{k}_vs_dbos" in ratio:
            value = ratio[f"{k}_vs_dbos"]
            headline[f"{label}vs_dbos"] = {
                "what": f"ours ({transport}) ÷ DBOS workflows/s at {engines}",
                "value": value,
                "target": f">= {PEER_TARGET}",
                "met": value >= PEER_TARGET,
            }
    ratio["headline"] = headline
    peer_figures: dict[str, Any] = {"dbos": {f"{n}_engines": dbos[n] for n in dbos}}
    if dbos_error:
        peer_figures["dbos_error"] = dbos_error
    figures["peer"] = peer_figures
    pngs = [_plot(ours, dbos, baseline, counts, publish)]
    notes += [
        "Throughput includes the producer running on the same 2 cores (PRODUCER_THREADS "
        "threads calling client.start / DBOSClient.enqueue); producer_s says how long it "
        "took: when it is close to window_s, the producer, not the engines, bounded the rate.",
        "xact_commit_per_workflow counts every committed transaction in the database during "
        "the window (reads included: each autocommit SELECT is a transaction), the "
        "producer's and the activities' own inserts; the exact counter counts write commits "
        "of the engine and client only (the standalone engine's turn path; the limit uses it "
        "for both transports: it is the design's minimum, what a Celery node adds on top "
        "shows in its xact_commit_per_workflow).",
        "start_to_complete latency includes queueing: the producer starts all runs in a "
        "few seconds (producer_s), faster than the engines drain them, so p50/p99 grow "
        "with RUNS; latency without queueing is in the latency benchmark.",
        "sessions_per_workflow: new PostgreSQL sessions per workflow (pg_stat_database "
        "sessions delta); the engine closes its connection after every turn "
        "(close_old_connections with CONN_MAX_AGE=0).",
        "DBOS runs each workflow in a thread of its executor; worker_concurrency "
        f"{dbos_concurrency or 'unbounded (DBOS default)'}, queue polling {DBOS_POLL_S} s, "
        "sys_db_pool_size 10, 4 connections for its steps' side-effect rows.",
    ]
    if "celery" in transports:
        notes.append(
            f"Celery: N nodes `celery -A project worker -P {children.CELERY_POOL} "
            f"-c {children.CELERY_CONCURRENCY}` (each node one weft engine in its main process, "
            f"turns in its pool processes), broker Redis ({children.broker_url()}), weft "
            "defaults (CLAIM_RENEW_INTERVAL 5 s is the polling backstop); this process is "
            "the web process: each client.start sends weft.pickup on commit. N nodes are "
            f"{children.CELERY_CONCURRENCY} × N + N processes on {os.cpu_count()} cores. "
            "Celery's Django fix-up closes every database connection before and after each "
            "task (CELERY_DB_REUSE_MAX is not set): sessions_per_workflow counts them."
        )
    return common.document(
        "throughput",
        mode="quick" if quick else "full",
        figures=figures,
        baseline=baseline,
        ratio=ratio,
        settings={
            "runs_per_configuration": runs,
            "engine_counts": list(counts),
            "transports": list(transports),
            "producer_threads": PRODUCER_THREADS,
            "weft": "weft_worker defaults: TRANSPORT polling, POLL_INTERVAL 0.2 s, "
            "WORKER_CONCURRENCY 4, CLAIM_TTL 30 s, CLAIM_RENEW_INTERVAL 5 s, LISTEN on",
            "celery": {
                "pool": children.CELERY_POOL,
                "concurrency_per_node": children.CELERY_CONCURRENCY,
                "broker": children.broker_url(),
                "worker_flags": "-l WARNING --without-mingle --without-gossip "
                "--without-heartbeat; prefetch multiplier and acks: Celery defaults",
                "weft": "defaults: CLAIM_RENEW_INTERVAL 5 s (polling backstop), "
                "CELERY_ETA_HORIZON 60 s",
            }
            if "celery" in transports
            else None,
            "pgbench": {
                "seconds": pg_seconds,
                "rows": PGBENCH_ROWS,
                "script": "\\set id random(1, 10000); UPDATE t SET v = v + 1 WHERE id = :id",
                "protocol": "simple",
                "threads": "= clients",
            },
            "dbos": {
                "database": DBOS_DB,
                "queue_polling_s": DBOS_POLL_S,
                "worker_concurrency": dbos_concurrency or None,
            },
            "interleaving": "per engine count: pgbench, ours (each transport), DBOS",
            "database": url,
        },
        machine=machine,
        notes=notes,
        url=url,
        pngs=pngs,
        extra_versions={"dbos": dbos_info if ok else None, "pgbench": binary},
    )


def _plot(
    ours: dict[str, dict[int, Any]],
    dbos: dict[int, Any],
    baseline: dict[str, Any],
    counts: tuple[int, ...],
    publish: bool,
) -> str:
    plt = common.pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    labels = {
        "polling": ("weft-django (weft_worker, polling)", "o"),
        "celery": ("weft-django (Celery nodes)", "D"),
    }
    for transport, by_n in ours.items():
        xs = sorted(by_n)
        label, marker = labels[transport]
        ax.plot(xs, [by_n[n]["workflows_per_s"] for n in xs], marker=marker, label=label)
    if dbos:
        xs = sorted(dbos)
        ax.plot(xs, [dbos[n]["workflows_per_s"] for n in xs], marker="s", label="DBOS (queue)")
    limits = [
        (n, baseline[f"{n}_engines"]["limit_workflows_per_s"])
        for n in counts
        if f"{n}_engines" in baseline
    ]
    if limits:
        ax.plot(
            [n for n, _ in limits],
            [v for _, v in limits],
            marker="^",
            linestyle="--",
            label="limit: pgbench UPDATE tps ÷ commits/workflow",
        )
        ax.plot(
            [n for n, _ in limits],
            [v * LIMIT_TARGET for _, v in limits],
            linestyle=":",
            color="grey",
            label=f"target: {LIMIT_TARGET:.0%} of the limit",
        )
    ax.set_yscale("log")
    ax.set_xticks(list(counts))
    ax.set_xlabel("engine processes / Celery nodes (= pgbench clients)")
    ax.set_ylabel("workflows / s (log)")
    ax.set_title(f"three-steps workflow throughput ({os.cpu_count()} cores)")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    path = common.publish_png(fig, "throughput", publish)
    plt.close(fig)
    return path


def main(argv: list[str] | None = None) -> int:
    parser = common.size_parser(__doc__)
    parser.add_argument(
        "--dbos-worker-concurrency",
        type=int,
        default=0,
        help="DBOS queue worker_concurrency (0: unbounded, the DBOS default)",
    )
    parser.add_argument("--runs", type=int, default=None, help="override runs per configuration")
    parser.add_argument(
        "--transport",
        choices=("polling", "celery", "all"),
        default="all",
        help="weft_worker engines (polling), Celery nodes, or both interleaved (default)",
    )
    parser.add_argument(
        "--counts",
        default=",".join(map(str, COUNTS)),
        help="engine counts, comma-separated (default 1,2,4)",
    )
    parser.add_argument("--no-peer", action="store_true", help="skip the DBOS peer")
    parser.add_argument(
        "--pgbench-seconds", type=int, default=None, help="override pgbench's duration"
    )
    args = parser.parse_args(argv)
    common.emit(
        run(
            quick=not args.full,
            publish=not args.no_publish,
            dbos_concurrency=args.dbos_worker_concurrency,
            runs=args.runs,
            transports=TRANSPORTS if args.transport == "all" else (args.transport,),
            counts=tuple(int(c) for c in args.counts.split(",")),
            peer=not args.no_peer,
            pg_seconds=args.pgbench_seconds,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
