"""Peers side by side: weft-django, DBOS and a (non-durable) Celery chain, one run.

The same three-step workflow for all three (three trivial steps, each writing
one side-effect row, each passing its result on): weft's "three-steps"
(``project/demo/workflows.py``, a ``SideEffect`` row through the ORM per
activity), DBOS's ``three_steps`` (``benchmarks/dbos_peer.py``, a psycopg
insert per step) and ``chain(reserve.s(id), charge.s(), ship.s())``
(``benchmarks/celery_chain.py``, a psycopg insert per task). Scenarios, each
repeated REPEATS times with the peers interleaved inside every repeat, the
median of the repeats reported:

1. **sequential**: one client does start → result, RUNS_SEQ times, waiting
   for each result before the next start: workflows/s (runs ÷ wall time)
   and the start → result latency (p50/p99). weft: one ``weft_worker``
   engine process (polling transport, LISTEN for NOTIFY, defaults), the
   client in this process (``client.start`` then ``handle.result()``).
   DBOS: one executor (``dbos_peer.py worker``, queue concurrency
   DBOS_CONCURRENCY, queue polling ``--dbos-poll``) and a ``DBOSClient``
   in another process (``dbos_peer.py sequential``: ``enqueue`` then the
   handle's ``get_result(polling_interval_sec=--dbos-poll)``); also, for
   context, DBOS in one process (``DBOS.start_workflow`` then ``get_result``
   inside the executor: no queue, no second process). Celery: one node
   ``-P prefork -c CELERY_CONCURRENCY`` on Redis, ``chain(...).apply_async()``
   then ``.get()`` (Redis result backend) from this process.
2. **burst**: RUNS_BURST starts as fast as PRODUCER_THREADS threads can,
   then wait for all: workflows/s = runs ÷ (last completion − first start).
   weft with 1, 2 and 4 ``weft_worker`` engines (``throughput.run_ours``,
   polling transport), each driving ``--weft-concurrency`` turns at once
   (default DBOS_CONCURRENCY: the same concurrency as the DBOS queue), and,
   for context, one engine at its default ``WORKER_CONCURRENCY`` (4,
   ``weft_1_engines_default``); DBOS one executor, a queue of
   DBOS_CONCURRENCY (``throughput.run_dbos``); the Celery chain on one node.

Targets (issue #15), each a ratio of this run's medians: sequential p50 ≤
1.0 × DBOS (moonshot 0.5 ×); sequential workflows/s ≥ 1.0 × DBOS; burst with
one engine ≥ 2 × DBOS and ≥ 1.0 × the Celery chain; 2 engines ≥ 1 engine; 4
≥ 2. DBOS means the ``DBOSClient`` peer (a client process and an executor,
like weft's client and engine); the in-process figure is reported beside it.
If ``benchmarks/.venv-dbos`` is missing the DBOS legs are skipped and the
document says why (``figures.dbos_skipped``); the weft and Celery legs
always run.
"""

from __future__ import annotations

import functools
import os
import socket
import sys
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from benchmarks import children, common, stats, throughput
from devtools.procs import wait_for

COUNTS = (1, 2, 4)
SCENARIOS = ("sequential", "burst")
PRODUCER_THREADS = throughput.PRODUCER_THREADS
WARMUP = 3  # untimed start → result runs per sequential leg (connections, caches, first pass)
DBOS_CONCURRENCY = 8  # the "queue of 8"
DBOS_POLL_S = 0.01  # DBOS's queue and get_result polling (it has no wake on enqueue)
CELERY_CONCURRENCY = children.CELERY_CONCURRENCY
RESULT_TIMEOUT_S = 60.0

TARGETS: dict[str, tuple[str, float, str]] = {
    # name: (comparison, bound, what)
    "sequential_p50_vs_dbos": ("<=", 1.0, "weft sequential p50 ÷ DBOS sequential p50"),
    "sequential_p50_vs_dbos_moonshot": ("<=", 0.5, "the same, moonshot"),
    "sequential_wps_vs_dbos": (">=", 1.0, "weft sequential workflows/s ÷ DBOS"),
    "burst_1_vs_dbos": (">=", 2.0, "weft burst, 1 engine ÷ DBOS burst (queue of 8)"),
    "burst_1_vs_celery": (">=", 1.0, "weft burst, 1 engine ÷ the Celery chain burst"),
    "burst_2_vs_1": (">=", 1.0, "weft burst, 2 engines ÷ 1 engine"),
    "burst_4_vs_2": (">=", 1.0, "weft burst, 4 engines ÷ 2 engines"),
}


def _sequential_summary(runs: int, elapsed_s: float, latencies: list[float]) -> dict[str, Any]:
    return {
        "runs": runs,
        "elapsed_s": round(elapsed_s, 2),
        "workflows_per_s": round(runs / elapsed_s, 2),
        "latency_ms": stats.distribution(latencies, 2),
    }


def _time_sequential(runs: int, one: Callable[[int], None]) -> dict[str, Any]:
    for i in range(WARMUP):
        one(-1 - i)
    latencies: list[float] = []
    started = time.perf_counter()
    for i in range(runs):
        t0 = time.perf_counter()
        one(i)
        latencies.append((time.perf_counter() - t0) * 1000)
    return _sequential_summary(runs, time.perf_counter() - started, latencies)


# -- weft ------------------------------------------------------------------------------


def weft_sequential(runs: int) -> dict[str, Any]:
    """One ``weft_worker``; this process starts one run and waits for its result, N times."""
    from django.db import connections

    from weft_django import client

    common.reset_tables()
    connections.close_all()
    tag = f"seq-{uuid.uuid4().hex[:6]}"
    workers = throughput.start_engines("polling", 1, tag)
    try:

        def one(i: int) -> None:
            wid = f"{tag}-{i}"
            handle = client.start("three-steps", {"id": wid}, workflow_id=wid)
            handle.result(timeout=RESULT_TIMEOUT_S)

        return _time_sequential(runs, one)
    finally:
        children.stop_all(workers)
        connections.close_all()


def weft_burst(n: int, runs: int, stats_conn: Any, concurrency: int | None) -> dict[str, Any]:
    """``concurrency``: the engines' ``--concurrency`` (``None``: the default)."""
    extra = () if concurrency is None else ("--concurrency", str(concurrency))
    out = throughput.run_ours(n, runs, stats_conn, "polling", extra)
    return {k: out[k] for k in ("runs", "window_s", "workflows_per_s", "producer_s")} | {
        "start_to_complete_ms": out["start_to_complete_ms"],
        "claim_attempts": out["claim_attempts"],
    }


# -- DBOS ------------------------------------------------------------------------------


def _dbos_argv(mode: str, *args: str) -> list[str]:
    return [str(throughput.dbos_python()), str(throughput.DBOS_PEER), mode, *args]


def _dbos_run_child(name: str, argv: list[str]) -> dict[str, Any]:
    child = children.spawn(name, argv, dict(os.environ), capture=True)
    wait_for(f"{name} to finish", lambda: child.proc.poll() is not None, timeout=600, interval=0.05)
    out = child.output_json()
    if child.proc.returncode != 0 or not out:
        raise RuntimeError(f"{name} failed:\n{child.log()[-3000:]}")
    return out


def _dbos_reset() -> None:
    with common.pg_connect(dbname=throughput.DBOS_DB) as conn:
        conn.execute("TRUNCATE dbos.workflow_status CASCADE")
        conn.execute("TRUNCATE bench_side_effect")


def dbos_sequential(runs: int, poll: float) -> dict[str, Any]:
    """One executor and a ``DBOSClient`` process: enqueue one, ``get_result``, repeat."""
    _dbos_reset()
    tag = f"dbseq-{uuid.uuid4().hex[:6]}"
    worker = throughput._dbos_worker(f"{tag}-w", DBOS_CONCURRENCY, poll)
    try:
        throughput._wait_ready([worker])
        flags = ["--url", throughput.dbos_url(), "--result-poll", str(poll)]
        _dbos_run_child(f"{tag}-warm", _dbos_argv("sequential", *flags, "--runs", str(WARMUP)))
        out = _dbos_run_child(
            f"{tag}-c", _dbos_argv("sequential", *flags, "--runs", str(runs), "--prefix", tag)
        )
    finally:
        worker.stop()
    return _sequential_summary(out["runs"], out["elapsed_s"], out["latency_ms"])


def dbos_in_process(runs: int, poll: float) -> dict[str, Any]:
    """``DBOS.start_workflow`` then ``get_result`` inside one executor process."""
    _dbos_reset()
    tag = f"dbinp-{uuid.uuid4().hex[:6]}"
    argv = _dbos_argv("worker", "--url", throughput.dbos_url(), "--executor", tag)
    argv += ["--poll", str(poll), "--result-poll", str(poll), "--sequential", str(runs)]
    out = _dbos_run_child(tag, argv)
    return _sequential_summary(out["runs"], out["elapsed_s"], out["latency_ms"])


def dbos_burst(runs: int, poll: float) -> dict[str, Any]:
    out = throughput.run_dbos(1, runs, DBOS_CONCURRENCY, poll)
    return {k: out.get(k) for k in ("runs", "window_s", "workflows_per_s", "producer_s")} | {
        "start_to_complete_ms": out["start_to_complete_ms"]
    }


# -- the Celery chain ------------------------------------------------------------------


class ChainNode:
    """One ``celery -A benchmarks.celery_chain worker`` node, booted and ready."""

    def __init__(self, tag: str) -> None:
        from benchmarks import celery_chain

        env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
        env.update(
            WEFT_BENCH_URL=common.bench_url(),
            WEFT_BENCH_BROKER=children.broker_url(),
            PYTHONPATH=str(common.REPO_ROOT),
        )
        node = f"{tag}@{socket.gethostname()}"
        self.child = children.spawn(tag, celery_chain.command(node, CELERY_CONCURRENCY), env)
        wait_for(
            "the Celery chain node",
            lambda: celery_chain.READY_MARK in self.child.log(),
            self.child,
            timeout=120,
            interval=0.05,
        )

    def stop(self) -> None:
        self.child.stop()


def _chain_reset() -> None:
    from benchmarks import celery_chain

    children.flush_broker()
    celery_chain.prepare_table()


def celery_sequential(runs: int) -> dict[str, Any]:
    from benchmarks import celery_chain

    _chain_reset()
    tag = f"chseq-{uuid.uuid4().hex[:6]}"
    node = ChainNode(tag)
    try:
        return _time_sequential(
            runs, lambda i: celery_chain.start(f"{tag}-{i}").get(timeout=RESULT_TIMEOUT_S)
        )
    finally:
        node.stop()


def celery_burst(runs: int) -> dict[str, Any]:
    """Send RUNS chains from PRODUCER_THREADS threads, then wait until every one
    shipped -- read from the side-effect table, where the window is read too.
    Not ``.get()`` on each result: Redis's result backend, subscribed from
    several threads, can miss a result (a 1,000-chain burst once waited with
    every chain shipped and every result stored)."""
    from benchmarks import celery_chain

    _chain_reset()
    tag = f"chb-{uuid.uuid4().hex[:6]}"
    node = ChainNode(tag)
    try:
        time.sleep(0.5)

        def chunk(k: int) -> None:
            for i in range(k, runs, PRODUCER_THREADS):
                celery_chain.start(f"{tag}-{i}")

        first = time.time()
        t0 = time.perf_counter()
        with ThreadPoolExecutor(max_workers=PRODUCER_THREADS) as pool:
            list(pool.map(chunk, range(PRODUCER_THREADS)))
        producer_s = time.perf_counter() - t0
        deadline = time.monotonic() + RESULT_TIMEOUT_S + runs
        with common.pg_connect() as conn:
            while True:
                shipped, last = conn.execute(
                    f"SELECT count(*), max(at) FROM {celery_chain.TABLE} WHERE kind = 'ship'"
                ).fetchone()
                if shipped >= runs or time.monotonic() > deadline:
                    break
                time.sleep(0.05)
    finally:
        node.stop()
    if shipped != runs:
        raise RuntimeError(f"{shipped} chains shipped, expected {runs}")
    window_s = last.timestamp() - first
    return {
        "runs": runs,
        "window_s": round(window_s, 2),
        "workflows_per_s": round(runs / window_s, 2),
        "producer_s": round(producer_s, 2),
    }


# -- the benchmark ---------------------------------------------------------------------


def _median_of(samples: list[dict[str, Any]]) -> dict[str, Any]:
    """The median over repeats of workflows/s (and of the latency p50/p99 when there)."""
    out: dict[str, Any] = {
        "workflows_per_s": round(stats.median(s["workflows_per_s"] for s in samples), 2),
        "workflows_per_s_all": [s["workflows_per_s"] for s in samples],
    }
    if "latency_ms" in samples[0]:
        for p in ("p50", "p99"):
            values = [s["latency_ms"][p] for s in samples]
            out[f"{p}_ms"] = round(stats.median(values), 2)
            out[f"{p}_ms_all"] = values
    out["repeats"] = samples
    return out


def _target(name: str, value: float | None) -> dict[str, Any]:
    op, bound, what = TARGETS[name]
    if value is None:
        return {"what": what, "ratio": None, "target": f"{op} {bound}", "met": None}
    met = value <= bound if op == "<=" else value >= bound
    return {"what": what, "ratio": value, "target": f"{op} {bound}", "met": met}


def _over(a: float | None, b: float | None) -> float | None:
    return None if a is None or not b else round(a / b, 3)


def run(
    quick: bool,
    publish: bool = True,
    runs_seq: int | None = None,
    runs_burst: int | None = None,
    repeats: int | None = None,
    counts: tuple[int, ...] = COUNTS,
    peer: bool = True,
    dbos_poll: float = DBOS_POLL_S,
    scenarios: tuple[str, ...] = SCENARIOS,
    weft_concurrency: int = DBOS_CONCURRENCY,
) -> dict[str, Any]:
    machine = common.Machine()
    url = common.bench_url()
    common.ensure_database(url)
    common.setup_django(url)
    runs_seq = runs_seq or (100 if quick else 1_000)
    runs_burst = runs_burst or (200 if quick else 1_000)
    repeats = repeats or (2 if quick else 3)
    notes = [common.TWO_CORE_NOTE.format(nproc=os.cpu_count())]

    ok, dbos_info = throughput.dbos_available() if peer else (False, "not run (--no-peer)")
    dbos_skipped: str | None = None if ok else dbos_info
    if ok:
        try:
            throughput.prepare_dbos()
        except Exception as exc:  # report exactly why, keep the rest
            dbos_skipped = f"DBOS could not be launched: {type(exc).__name__}: {exc}"[:2000]

    legs: dict[str, list[dict[str, Any]]] = {}

    def measure(name: str, fn: Callable[[], dict[str, Any]]) -> None:
        print(f"# peers: {name}", file=sys.stderr, flush=True)
        legs.setdefault(name, []).append(fn())

    def dbos_leg(name: str, fn: Callable[[], dict[str, Any]]) -> None:
        nonlocal dbos_skipped
        if dbos_skipped is None:
            try:
                measure(name, fn)
            except Exception as exc:
                dbos_skipped = f"{name} failed: {type(exc).__name__}: {exc}"[:3000]

    stats_conn = common.pg_connect()
    for _ in range(repeats):
        if "sequential" in scenarios:
            measure("sequential.weft", lambda: weft_sequential(runs_seq))
            dbos_leg("sequential.dbos", lambda: dbos_sequential(runs_seq, dbos_poll))
            dbos_leg("sequential.dbos_in_process", lambda: dbos_in_process(runs_seq, dbos_poll))
            measure("sequential.celery_chain", lambda: celery_sequential(runs_seq))
        for n in counts if "burst" in scenarios else ():
            measure(
                f"burst.weft_{n}_engines",
                functools.partial(weft_burst, n, runs_burst, stats_conn, weft_concurrency),
            )
            if n == 1:
                # Context: the same engine at its default WORKER_CONCURRENCY (4).
                measure(
                    "burst.weft_1_engines_default",
                    functools.partial(weft_burst, 1, runs_burst, stats_conn, None),
                )
                dbos_leg("burst.dbos", lambda: dbos_burst(runs_burst, dbos_poll))
                measure("burst.celery_chain", lambda: celery_burst(runs_burst))
    stats_conn.close()
    common.reset_tables()

    figures: dict[str, Any] = {"sequential": {}, "burst": {}}
    for name, samples in legs.items():
        scenario, who = name.split(".", 1)
        figures[scenario][who] = _median_of(samples)
    if dbos_skipped:
        figures["dbos_skipped"] = dbos_skipped
    seq, burst = figures["sequential"], figures["burst"]

    def get(group: dict[str, Any], who: str, k: str) -> float | None:
        return group.get(who, {}).get(k)

    w1 = ("burst", "weft_1_engines", "workflows_per_s")
    pairs = {  # target: (ours, its baseline), each (scenario, peer, key) in ``figures``
        "sequential_p50_vs_dbos": (
            ("sequential", "weft", "p50_ms"),
            ("sequential", "dbos", "p50_ms"),
        ),
        "sequential_wps_vs_dbos": (
            ("sequential", "weft", "workflows_per_s"),
            ("sequential", "dbos", "workflows_per_s"),
        ),
        "burst_1_vs_dbos": (w1, ("burst", "dbos", "workflows_per_s")),
        "burst_1_vs_celery": (w1, ("burst", "celery_chain", "workflows_per_s")),
        "burst_2_vs_1": (("burst", "weft_2_engines", "workflows_per_s"), w1),
        "burst_4_vs_2": (
            ("burst", "weft_4_engines", "workflows_per_s"),
            ("burst", "weft_2_engines", "workflows_per_s"),
        ),
    }
    pairs["sequential_p50_vs_dbos_moonshot"] = pairs["sequential_p50_vs_dbos"]

    def fig_of(where: tuple[str, str, str]) -> float | None:
        scenario, who, k = where
        return get(figures[scenario], who, k)

    values = {name: _over(fig_of(a), fig_of(b)) for name, (a, b) in pairs.items()}
    targets = {name: _target(name, values[name]) for name in TARGETS}
    for name, (a, b) in pairs.items():  # the two figures of each ratio, from this run
        targets[name]["ours"] = {".".join(a): fig_of(a)}
        targets[name]["baseline"] = {".".join(b): fig_of(b)}
    ratio: dict[str, Any] = {
        **{k: v for k, v in values.items() if k != "sequential_p50_vs_dbos_moonshot"},
        "sequential_p50_vs_dbos_in_process": _over(
            get(seq, "weft", "p50_ms"), get(seq, "dbos_in_process", "p50_ms")
        ),
        "sequential_wps_vs_dbos_in_process": _over(
            get(seq, "weft", "workflows_per_s"), get(seq, "dbos_in_process", "workflows_per_s")
        ),
        "sequential_p50_vs_celery": _over(
            get(seq, "weft", "p50_ms"), get(seq, "celery_chain", "p50_ms")
        ),
        "sequential_wps_vs_celery": _over(
            get(seq, "weft", "workflows_per_s"), get(seq, "celery_chain", "workflows_per_s")
        ),
        # Context: one engine at its default WORKER_CONCURRENCY (4), not a target.
        "burst_1_default_vs_dbos": _over(
            get(burst, "weft_1_engines_default", "workflows_per_s"),
            get(burst, "dbos", "workflows_per_s"),
        ),
        "burst_1_default_vs_celery": _over(
            get(burst, "weft_1_engines_default", "workflows_per_s"),
            get(burst, "celery_chain", "workflows_per_s"),
        ),
        "targets": targets,
        "headline": {
            k: {
                "value": t["ratio"],
                "target": t["target"],
                "met": t["met"],
                "ours": t["ours"],
                "baseline": t["baseline"],
            }
            for k, t in targets.items()
        },
    }
    baseline = {
        "dbos_sequential": seq.get("dbos"),
        "dbos_in_process_sequential": seq.get("dbos_in_process"),
        "celery_chain_sequential": seq.get("celery_chain"),
        "dbos_burst": burst.get("dbos"),
        "celery_chain_burst": burst.get("celery_chain"),
        "weft_burst_fewer_engines": {
            f"{n}_engines": get(burst, f"weft_{n}_engines", "workflows_per_s") for n in counts
        },
    }
    baseline = {k: _strip(v) for k, v in baseline.items()}
    pngs = [_plot(figures, counts, publish)]
    notes += [
        "Every figure is the median over the repeats (workflows_per_s_all, p50_ms_all: "
        "each repeat's value, in order); inside a repeat the peers run one after the other.",
        "Sequential: latency is start call → result returned, measured in the client "
        f"(time.perf_counter), {WARMUP} untimed warm-up runs first; workflows/s = runs ÷ "
        "wall time of the timed runs.",
        "Burst: window = last completion (the run's finished_at; DBOS completed_at; the "
        "Celery chain's last side-effect row) − first start (the run's created_at; DBOS "
        "created_at; the wall clock just before the first apply_async). The producer "
        f"({PRODUCER_THREADS} threads) runs on the same cores.",
        f"DBOS polls (no wake on enqueue): queue polling {dbos_poll} s and get_result "
        f"polling {dbos_poll} s (throughput.py uses 0.2 s = weft's POLL_INTERVAL, which "
        "bounds a queue of 8 at 40 workflows/s); worker_concurrency "
        f"{DBOS_CONCURRENCY}. weft's engine wakes on NOTIFY, its result() on NOTIFY.",
        "The Celery chain is not durable (no record of progress, a lost worker loses "
        f"the chain): one node -P prefork -c {CELERY_CONCURRENCY} (one pool process per "
        "core, like the weft Celery nodes of throughput.py), Redis broker and result "
        "backend, JSON serializer, no Django in the worker.",
    ]
    return common.document(
        "peers",
        mode="quick" if quick else "full",
        figures=figures,
        baseline=baseline,
        ratio=ratio,
        settings={
            "runs_sequential": runs_seq,
            "runs_burst": runs_burst,
            "repeats": repeats,
            "warmup_runs": WARMUP,
            "engine_counts": list(counts),
            "producer_threads": PRODUCER_THREADS,
            "weft": "weft_worker defaults: TRANSPORT polling, POLL_INTERVAL 0.2 s, LISTEN on, "
            "result() waits on NOTIFY; WORKER_CONCURRENCY 4 (the default) for sequential "
            f"and burst.weft_1_engines_default, {weft_concurrency} (--weft-concurrency, "
            "default the DBOS queue's concurrency) for the other burst legs",
            "weft_concurrency": weft_concurrency,
            "dbos": {
                "database": throughput.DBOS_DB,
                "queue_polling_s": dbos_poll,
                "get_result_polling_s": dbos_poll,
                "worker_concurrency": DBOS_CONCURRENCY,
                "executors": 1,
            },
            "celery_chain": {
                "pool": "prefork",
                "concurrency": CELERY_CONCURRENCY,
                "broker": children.broker_url(),
                "result_backend": children.broker_url(),
            },
            "interleaving": "per repeat: sequential weft, DBOS (client), DBOS (in process), "
            "Celery chain; burst weft 1 engine, DBOS, Celery chain, weft 2, weft 4",
            "database": url,
        },
        machine=machine,
        notes=notes,
        url=url,
        pngs=pngs,
        extra_versions={"dbos": dbos_info if ok else None},
    )


def _strip(fig: dict[str, Any] | None) -> dict[str, Any] | None:
    """A baseline entry without the per-repeat detail (that lives in ``figures``)."""
    if fig is None:
        return None
    return {k: v for k, v in fig.items() if k != "repeats"}


def _plot(figures: dict[str, Any], counts: tuple[int, ...], publish: bool) -> str:
    plt = common.pyplot()
    seq, burst = figures["sequential"], figures["burst"]
    fig, axes = plt.subplots(1, 3, figsize=(13, 4.2), gridspec_kw={"width_ratios": [4, 4, 5]})
    labels = {
        "weft": "weft",
        "dbos": "DBOS\n(client)",
        "dbos_in_process": "DBOS\n(in process)",
        "celery_chain": "Celery chain\n(not durable)",
    }
    order = [k for k in labels if k in seq]
    colors = ["C0" if k == "weft" else "C1" if k.startswith("dbos") else "C2" for k in order]
    for ax, key, title in (
        (axes[0], "workflows_per_s", "sequential start → result, workflows/s"),
        (axes[1], "p50_ms", "sequential start → result, p50 ms"),
    ):
        vals = [seq[k][key] for k in order]
        ax.bar([labels[k] for k in order], vals, color=colors)
        ax.bar_label(ax.containers[0], fmt="%.1f", fontsize=8)
        ax.set_title(title, fontsize=10)
    border = [f"weft_{n}_engines" for n in counts if f"weft_{n}_engines" in burst]
    border += [k for k in ("weft_1_engines_default", "dbos", "celery_chain") if k in burst]
    names = {f"weft_{n}_engines": f"weft\n×{n}" for n in counts}
    names |= {
        "weft_1_engines_default": "weft ×1\nconc. 4",
        "dbos": "DBOS\nqueue of 8",
        "celery_chain": "Celery\nchain",
    }
    bcolors = ["C0" if k.startswith("weft") else "C1" if k == "dbos" else "C2" for k in border]
    burst_values = [burst[k]["workflows_per_s"] for k in border]
    axes[2].bar([names[k] for k in border], burst_values, color=bcolors)
    axes[2].bar_label(axes[2].containers[0], fmt="%.1f", fontsize=8)
    axes[2].set_title("burst, workflows/s (weft: × engines, concurrency 8)", fontsize=10)
    for ax in axes:
        ax.tick_params(axis="x", labelsize=8)
        ax.grid(alpha=0.3, axis="y")
    fig.suptitle(f"three-step workflow, peers side by side ({os.cpu_count()} cores, median)")
    path = common.publish_png(fig, "peers", publish)
    plt.close(fig)
    return path


def main(argv: list[str] | None = None) -> int:
    parser = common.size_parser(__doc__)
    parser.add_argument("--runs-sequential", type=int, default=None)
    parser.add_argument("--runs-burst", type=int, default=None)
    parser.add_argument("--repeats", type=int, default=None)
    parser.add_argument("--counts", default=",".join(map(str, COUNTS)), help="weft engine counts")
    parser.add_argument("--no-peer", action="store_true", help="skip DBOS (reported as skipped)")
    parser.add_argument("--dbos-poll", type=float, default=DBOS_POLL_S, help="seconds")
    parser.add_argument(
        "--weft-concurrency",
        type=int,
        default=DBOS_CONCURRENCY,
        help="the burst engines' WORKER_CONCURRENCY (default: the DBOS queue's, 8)",
    )
    parser.add_argument(
        "--scenarios",
        default=",".join(SCENARIOS),
        help="comma-separated subset of: " + ", ".join(SCENARIOS),
    )
    args = parser.parse_args(argv)
    scenarios = tuple(s.strip() for s in args.scenarios.split(",") if s.strip())
    unknown = sorted(set(scenarios) - set(SCENARIOS))
    if unknown or not scenarios:
        parser.error(f"--scenarios {args.scenarios!r}: choose from {', '.join(SCENARIOS)}")
    common.emit(
        run(
            quick=not args.full,
            publish=not args.no_publish,
            runs_seq=args.runs_sequential,
            runs_burst=args.runs_burst,
            repeats=args.repeats,
            counts=tuple(int(c) for c in args.counts.split(",")),
            peer=not args.no_peer,
            dbos_poll=args.dbos_poll,
            scenarios=scenarios,
            weft_concurrency=args.weft_concurrency,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
