"""Django tasks: ``WeftTaskBackend`` + 1 ``weft_worker`` against django-tasks-db + 1 ``db_worker``.

The same N trivial tasks (``noop(i)``, returning ``i``) through each backend
on the same PostgreSQL server (a database each: ``weft_tasks_bench`` and
``weft_tasks_bench_peer``), the two legs interleaved repeat by repeat so a
change in the machine's load hits both. Each leg: empty its tables, start its
one worker (``manage.py weft_worker``; django-tasks-db's ``db_worker`` at its
default ``--interval`` of 1 s), run one warm-up task to completion, then
enqueue the N tasks one by one from one process (each its own commit, as a
view would) and wait until all are SUCCESSFUL.

Figures come from the rows each backend wrote, on the database's clock
(both stamp with ``timezone.now()`` in processes on this machine):

- ``tasks_per_s`` = N / (last ``finished_at`` - first ``enqueued_at``);
- enqueue -> SUCCESSFUL latency per task = ``finished_at - enqueued_at``
  (weft: the run's ``created_at`` and ``finished_at``), p50 and p99.

Ratios are same-repeat ratios (weft / peer for throughput, weft / peer for
latency: lower is better), then the median over repeats. The peer runs in
its own virtual environment (``benchmarks/.venv-tasksdb``, see
``benchmarks/tasksdb_peer``); without it the peer leg is skipped and the
document says so.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from typing import Any

from benchmarks import common
from benchmarks.stats import median, percentile, rnd
from devtools import procs

WEFT_DB = "weft_tasks_bench"
PEER_DB = "weft_tasks_bench_peer"
PEER_VENV = common.REPO_ROOT / "benchmarks" / ".venv-tasksdb"
PEER_TABLE = "django_tasks_database_dbtaskresult"
HANG_S = 600.0  # hang protection only


def _urls() -> tuple[str, str]:
    base = common.bench_url()
    return common.with_database(base, WEFT_DB), common.with_database(base, PEER_DB)


def _peer_python() -> str | None:
    python = PEER_VENV / "bin" / "python"
    return str(python) if python.exists() else None


def _peer_env(url: str) -> dict[str, str]:
    return procs.child_env(url, DJANGO_SETTINGS_MODULE="benchmarks.tasksdb_peer.settings")


def _summary(n: int, rows: list[tuple[Any, Any]]) -> dict[str, Any]:
    """``rows``: (enqueued_at, finished_at) of each task."""
    first = min(e for e, _ in rows)
    last = max(f for _, f in rows)
    span = (last - first).total_seconds()
    latencies = [(f - e).total_seconds() * 1000 for e, f in rows]
    return {
        "tasks": n,
        "span_s": rnd(span),
        "tasks_per_s": rnd(n / span if span > 0 else None, 1),
        "latency_ms": {
            "p50": rnd(percentile(latencies, 50), 1),
            "p99": rnd(percentile(latencies, 99), 1),
            "max": rnd(max(latencies), 1),
        },
    }


def _wait(what: str, probe: Any, *children: procs.ChildGroup) -> Any:
    return procs.wait_for(what, probe, *children, timeout=HANG_S, interval=0.05)


def weft_leg(n: int, repeat: int) -> dict[str, Any]:
    from django.db import close_old_connections

    from benchmarks.task_defs import noop
    from weft_django.models import EngineRecord, WorkflowRun

    url, _ = _urls()
    common.reset_tables()
    engine_id = f"bench-tasks-{repeat}"
    worker = procs.ChildGroup(
        [procs.python(), "manage.py", "weft_worker", "--engine-id", engine_id],
        common.LOG_DIR / f"tasks-weft-{repeat}.log",
        common.child_env(url),
    )
    try:
        _wait(
            "the weft worker to boot",
            lambda: EngineRecord.objects.filter(pk=engine_id).first(),
            worker,
        )
        warm = noop.enqueue(-1)
        _wait(
            "the warm-up task",
            lambda: WorkflowRun.objects.filter(workflow_id=warm.id, status="completed").exists(),
            worker,
        )
        began = time.monotonic()
        ids = [noop.enqueue(i).id for i in range(n)]
        enqueue_s = time.monotonic() - began

        def done() -> bool:
            close_old_connections()
            return WorkflowRun.objects.filter(workflow_id__in=ids, status="completed").count() == n

        _wait(f"{n} weft tasks", done, worker)
        rows = list(
            WorkflowRun.objects.filter(workflow_id__in=ids).values_list("created_at", "finished_at")
        )
        failed = WorkflowRun.objects.filter(workflow_id__in=ids).exclude(status="completed").count()
    finally:
        worker.stop()
    out = _summary(n, rows)
    out["enqueue_s"] = rnd(enqueue_s)
    out["not_successful"] = failed
    return out


def peer_leg(n: int, repeat: int) -> dict[str, Any]:
    _, url = _urls()
    python = _peer_python()
    assert python is not None
    env = _peer_env(url)
    with common.pg_connect(url) as conn:
        conn.execute(f"TRUNCATE {PEER_TABLE}")
    worker = procs.ChildGroup(
        [python, "-m", "benchmarks.tasksdb_peer", "db_worker", "--worker-id", f"peer-{repeat}"],
        common.LOG_DIR / f"tasks-peer-{repeat}.log",
        env,
    )
    try:
        with common.pg_connect(url) as conn:

            def count(status: str) -> int:
                row = conn.execute(
                    f"SELECT count(*) FROM {PEER_TABLE} WHERE status = %s", [status]
                ).fetchone()
                return int(row[0])

            subprocess.run(
                [python, "-m", "benchmarks.tasksdb_peer", "bench_enqueue", "1"],
                cwd=common.REPO_ROOT,
                env=env,
                check=True,
                capture_output=True,
            )
            _wait("the warm-up task", lambda: count("SUCCESSFUL") == 1, worker)
            conn.execute(f"TRUNCATE {PEER_TABLE}")
            done = subprocess.run(
                [python, "-m", "benchmarks.tasksdb_peer", "bench_enqueue", str(n)],
                cwd=common.REPO_ROOT,
                env=env,
                check=True,
                capture_output=True,
                text=True,
            )
            enqueue_s = json.loads(done.stdout.strip().splitlines()[-1])["enqueue_s"]
            _wait(
                f"{n} django-tasks-db tasks",
                lambda: count("SUCCESSFUL") + count("FAILED") >= n,
                worker,
            )
            rows = conn.execute(f"SELECT enqueued_at, finished_at FROM {PEER_TABLE}").fetchall()
            failed = count("FAILED")
    finally:
        worker.stop()
    out = _summary(n, rows)
    out["enqueue_s"] = rnd(enqueue_s)
    out["not_successful"] = failed
    return out


def _ratio(a: float | None, b: float | None) -> float | None:
    return rnd(a / b) if a is not None and b else None


def run(
    quick: bool = True, publish: bool = True, n: int | None = None, repeats: int | None = None
) -> dict[str, Any]:
    del publish  # no chart
    n = n or 1000
    repeats = repeats or (3 if quick else 5)
    machine = common.Machine()
    weft_url, peer_url = _urls()
    common.ensure_database(weft_url)
    common.setup_django(weft_url)
    peer = _peer_python()
    notes = [common.TWO_CORE_NOTE.format(nproc=os.cpu_count())]
    if peer is not None:
        common.create_database(PEER_DB, peer_url)
        subprocess.run(
            [peer, "-m", "benchmarks.tasksdb_peer", "migrate", "--noinput", "-v", "0"],
            cwd=common.REPO_ROOT,
            env=_peer_env(peer_url),
            check=True,
        )
    else:
        notes.append(f"{PEER_VENV} is missing: the django-tasks-db leg was skipped")
    legs: list[dict[str, Any]] = []
    for repeat in range(repeats):
        leg: dict[str, Any] = {"weft": weft_leg(n, repeat)}
        if peer is not None:
            leg["django_tasks_db"] = peer_leg(n, repeat)
            w, p = leg["weft"], leg["django_tasks_db"]
            leg["ratio"] = {
                "throughput_weft_over_peer": _ratio(w["tasks_per_s"], p["tasks_per_s"]),
                "p50_weft_over_peer": _ratio(w["latency_ms"]["p50"], p["latency_ms"]["p50"]),
                "p99_weft_over_peer": _ratio(w["latency_ms"]["p99"], p["latency_ms"]["p99"]),
            }
        print(f"# repeat {repeat}: {json.dumps(leg)}", file=sys.stderr, flush=True)
        legs.append(leg)

    def med(path: tuple[str, ...]) -> float | None:
        values = []
        for leg in legs:
            value: Any = leg
            for key in path:
                value = value.get(key) if isinstance(value, dict) else None
            if value is not None:
                values.append(value)
        return rnd(median(values)) if values else None

    throughput = med(("ratio", "throughput_weft_over_peer"))
    p50 = med(("ratio", "p50_weft_over_peer"))
    ratio = {
        "throughput_weft_over_peer": throughput,
        "p50_weft_over_peer": p50,
        "p99_weft_over_peer": med(("ratio", "p99_weft_over_peer")),
        "headline": {
            "throughput": {
                "value": throughput,
                "target": ">= 1.5",
                "met": throughput is not None and throughput >= 1.5,
            },
            "p50": {"value": p50, "target": "<= 0.5", "met": p50 is not None and p50 <= 0.5},
        },
    }
    figures = {
        "weft": {
            "tasks_per_s": med(("weft", "tasks_per_s")),
            "p50_ms": med(("weft", "latency_ms", "p50")),
            "p99_ms": med(("weft", "latency_ms", "p99")),
        },
        "django_tasks_db": {
            "tasks_per_s": med(("django_tasks_db", "tasks_per_s")),
            "p50_ms": med(("django_tasks_db", "latency_ms", "p50")),
            "p99_ms": med(("django_tasks_db", "latency_ms", "p99")),
        },
        "repeats": legs,
    }
    return common.document(
        "tasks",
        mode="quick" if quick else "full",
        figures=figures,
        baseline={
            "peer": "django-tasks-db DatabaseBackend + 1 db_worker (--interval 1 s, its default)"
        },
        ratio=ratio,
        settings={
            "tasks": n,
            "repeats": repeats,
            "weft_worker": "1 process, project.settings defaults",
            "databases": [WEFT_DB, PEER_DB],
        },
        machine=machine,
        notes=notes,
        url=weft_url,
    )


def main(argv: list[str] | None = None) -> int:
    parser = common.size_parser(__doc__)
    parser.add_argument("--tasks", type=int, default=None, help="N (default 1000)")
    parser.add_argument("--repeats", type=int, default=None)
    args = parser.parse_args(argv)
    common.emit(
        run(quick=not args.full, publish=not args.no_publish, n=args.tasks, repeats=args.repeats)
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
