"""Queue admission: how soon a freed slot is refilled, and what fairness costs.

Two measurements ``benchmarks.queues`` runs in the same run:

``latency``: ``ENGINES`` ``weft_worker`` processes serving only
``bench-lat`` (concurrency 1) with the NOTIFY wake backend and a 5 s poll
(so a wake that is lost shows as a 5 s gap, never as a fast one). RUNS
``bench-one`` runs are started at once; they go through the one slot one
after another. The latency of an admission is its slot's ``admitted_at``
minus the ``finished_at`` of the run that held the slot before it (the
commit that freed it announces the next waiting run: ``engine.queues.freed``).
Target: p99 ≤ 100 ms.

``cpu``: in this process, one engine (``background_tasks="manual"``, no
workers running) admits SEEDED pending runs of ``bench-fair`` (``"fair":
True``) and of ``bench-fifo`` (the same queue without it), ``KEYS``
concurrency keys each, alternating one admission pass of each
(``admit_pending(engine, limit)``) until both are drained. CPU per admission
= (this process's CPU + the PostgreSQL backend's CPU, from
``/proc/<pid>/stat``) ÷ admitted runs, for ``limit`` 1 (every admission pays
the ordering) and 10. Target: fair ≤ 1.2 × FIFO.
"""

from __future__ import annotations

import itertools
import os
import statistics
import time
import uuid
from typing import Any

from benchmarks import children
from devtools.procs import ChildGroup, wait_for

LAT_QUEUE = "bench-lat"
FAIR_QUEUE = "bench-fair"
FIFO_QUEUE = "bench-fifo"
QUEUES: dict[str, dict[str, Any]] = {
    LAT_QUEUE: {"concurrency": 1},
    FAIR_QUEUE: {"concurrency": 1_000_000, "fair": True},
    FIFO_QUEUE: {"concurrency": 1_000_000},
}
ENGINES = 2
POLL_INTERVAL_S = 5
KEYS = 20
LATENCY_TARGET_MS = 100.0
CPU_TARGET = 1.2


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


def latency(runs: int, env: dict[str, str]) -> dict[str, Any]:
    """Admission latency after a slot frees (see the module doc)."""
    from django.db import connections

    from weft_django import client
    from weft_django.models import EngineRecord, QueueSlot, WorkflowRun

    env = {**env, "WEFT_POLL_INTERVAL": str(POLL_INTERVAL_S)}
    tag = uuid.uuid4().hex[:6]
    workers: list[ChildGroup] = [
        children.weft_worker(f"bench-lat{tag}-{i}", "--queues", LAT_QUEUE, env=env)
        for i in range(ENGINES)
    ]
    try:
        wait_for(
            f"{ENGINES} engines to boot",
            lambda: (
                EngineRecord.objects.filter(
                    stopped_at__isnull=True, engine_id__startswith=f"bench-lat{tag}"
                ).count()
                >= ENGINES
            ),
            *workers,
            timeout=120,
            interval=0.05,
        )
        time.sleep(0.5)  # the LISTENs are up
        prefix = f"blat-{tag}"
        for i in range(runs):
            client.start("bench-one", {"i": i}, workflow_id=f"{prefix}-{i}", queue=LAT_QUEUE)
        mine = WorkflowRun.objects.filter(workflow_id__startswith=f"{prefix}-")
        wait_for(
            f"{runs} runs to complete",
            lambda: mine.filter(status="completed").count() >= runs,
            *workers,
            timeout=60 + runs * POLL_INTERVAL_S,
            interval=0.1,
        )
    finally:
        children.stop_all(workers)
        connections.close_all()
    finished = {w: f.timestamp() * 1000 for w, f in mine.values_list("workflow_id", "finished_at")}
    slots = list(
        QueueSlot.objects.filter(
            queue=LAT_QUEUE, workflow_id__startswith=f"{prefix}-", position__isnull=True
        )
        .order_by("admitted_at")
        .values_list("workflow_id", "admitted_at")
    )
    gaps = [float(at - finished[before]) for (before, _), (_, at) in itertools.pairwise(slots)]
    p50, p99 = round(_percentile(gaps, 0.5), 1), round(_percentile(gaps, 0.99), 1)
    return {
        "runs": runs,
        "admissions_measured": len(gaps),
        "latency_ms_p50": p50,
        "latency_ms_p99": p99,
        "latency_ms_max": round(max(gaps), 1),
        "latency_ms_mean": round(statistics.fmean(gaps), 1),
        "target_p99_ms": LATENCY_TARGET_MS,
        "met": p99 <= LATENCY_TARGET_MS,
        "wake_backend": "NOTIFY",
        "poll_interval_s": POLL_INTERVAL_S,
    }


def _backend_cpu_s(pid: int) -> float:
    """utime + stime of a local PostgreSQL backend, in seconds (``/proc``)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _seed(queue: str, runs: int, tag: str) -> None:
    from weft_django import client

    for i in range(runs):
        client.start(
            "bench-one",
            {"i": i},
            workflow_id=f"bcpu-{tag}-{queue}-{i}",
            queue=queue,
            concurrency_key=f"k{i % KEYS}",
        )


def cpu(seeded: int, limit: int) -> dict[str, Any]:
    """Fair vs FIFO CPU per admission at ``limit`` runs per pass (see the module doc)."""
    from django.db import connection, connections

    from weft_django.engine import Engine
    from weft_django.engine.maintenance.admission import admit_pending
    from weft_django.models import WorkflowRun

    tag = uuid.uuid4().hex[:6]
    _seed(FAIR_QUEUE, seeded, tag)
    _seed(FIFO_QUEUE, seeded, tag)
    engine = Engine(background_tasks="manual").boot()
    spent = {FAIR_QUEUE: [0.0, 0.0, 0], FIFO_QUEUE: [0.0, 0.0, 0]}  # own, backend, admitted
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            backend = int(cursor.fetchone()[0])
        left = {FAIR_QUEUE: seeded, FIFO_QUEUE: seeded}
        while any(left.values()):
            for name in (FIFO_QUEUE, FAIR_QUEUE):
                if not left[name]:
                    continue
                engine.served_queues = frozenset({name})  # one queue per measured pass
                own0, db0 = time.process_time(), _backend_cpu_s(backend)
                admitted = len(admit_pending(engine, limit))
                spent[name][0] += time.process_time() - own0
                spent[name][1] += _backend_cpu_s(backend) - db0
                spent[name][2] += admitted
                left[name] = max(0, left[name] - admitted) if admitted else 0
        stuck = WorkflowRun.objects.filter(
            workflow_id__startswith=f"bcpu-{tag}-", status="pending"
        ).count()
    finally:
        engine.dispose(grace=0)
        connections.close_all()
    per = {
        name: {
            "admitted": int(n),
            "own_cpu_us_per_admission": round(own / max(n, 1) * 1e6, 1),
            "db_cpu_us_per_admission": round(dbs / max(n, 1) * 1e6, 1),
            "cpu_us_per_admission": round((own + dbs) / max(n, 1) * 1e6, 1),
        }
        for name, (own, dbs, n) in spent.items()
    }
    fifo = per[FIFO_QUEUE]["cpu_us_per_admission"]
    ratio = round(per[FAIR_QUEUE]["cpu_us_per_admission"] / fifo, 3) if fifo else 0.0
    return {
        "limit_per_pass": limit,
        "seeded_per_queue": seeded,
        "keys": KEYS,
        "fair": per[FAIR_QUEUE],
        "fifo": per[FIFO_QUEUE],
        "fair_over_fifo": ratio,
        "target": CPU_TARGET,
        "met": ratio <= CPU_TARGET,
        "left_pending": stuck,
    }


__all__ = ["QUEUES", "cpu", "latency"]
