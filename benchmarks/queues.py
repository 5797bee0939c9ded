"""Queue overhead: start→complete throughput through a queue with generous limits
vs without a queue, in the same run (issue #16). Target: ratio ≥ 0.8.

``ENGINES`` ``manage.py weft_worker`` processes run with ``WEFT["QUEUES"] =
{"bench-q": {"concurrency": 10000, "rate": "1000000/m", "per_key_concurrency":
10000}}`` (every limit on, none binding: the admission's lock, its counts and
the fenced slot are the cost measured). A producer in this process calls
``client.start("three-steps", …)`` RUNS times from two threads, alternately
without a queue and with ``queue="bench-q"`` (and a concurrency key per run),
``TRIALS`` times each, interleaved, and waits for every run to complete.
Throughput of a trial = RUNS ÷ (last ``finished_at`` − first ``created_at``);
the ratio is the median queued trial ÷ the median unqueued one. Also: the
start→complete latency p50/p99 of each case, and the live slots left at the
end (0: every slot was freed by its run's end).

In the same run (``benchmarks.queue_admission``): the admission latency after
a slot frees (NOTIFY; target p99 ≤ 100 ms) and the CPU per admission of a
fair queue against a FIFO one (target ≤ 1.2×), under ``admission`` in the
document's figures.

``python -m benchmarks.queues --quick|--full`` (or ``python -m benchmarks queues``);
prints ONE JSON document and keeps it in ``benchmarks/out/queues.json``.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from benchmarks import children, common, queue_admission
from devtools.procs import ChildGroup, wait_for

QUEUE = "bench-q"
QUEUES = {
    QUEUE: {"concurrency": 10_000, "rate": "1000000/m", "per_key_concurrency": 10_000},
    **queue_admission.QUEUES,
}
ENGINES = 2
PRODUCER_THREADS = 2
TARGET = 0.8


def _produce(runs: int, prefix: str, queued: bool) -> None:
    from django.db import connections

    from weft_django import client

    def chunk(k: int) -> None:
        try:
            for i in range(k, runs, PRODUCER_THREADS):
                wid = f"{prefix}-{i}"
                if queued:
                    client.start(
                        "three-steps",
                        {"id": wid},
                        workflow_id=wid,
                        queue=QUEUE,
                        concurrency_key=f"k{i % 50}",
                    )
                else:
                    client.start("three-steps", {"id": wid}, workflow_id=wid)
        finally:
            connections.close_all()

    with ThreadPoolExecutor(max_workers=PRODUCER_THREADS) as pool:
        list(pool.map(chunk, range(PRODUCER_THREADS)))


def _trial(runs: int, queued: bool, workers: list[ChildGroup]) -> dict[str, Any]:
    from weft_django.models import WorkflowRun

    prefix = f"bq{'q' if queued else 'p'}-{uuid.uuid4().hex[:6]}"
    _produce(runs, prefix, queued)
    mine = WorkflowRun.objects.filter(workflow_id__startswith=f"{prefix}-")

    def done() -> bool:
        if mine.filter(status__in=("failed", "cancelled", "timed_out")).exists():
            raise RuntimeError(
                f"a run did not complete: {mine.exclude(status='completed').first()}"
            )
        return mine.filter(status="completed").count() >= runs

    wait_for(f"{runs} runs to complete", done, *workers, timeout=120 + runs, interval=0.1)
    rows = list(mine.values_list("created_at", "finished_at"))
    first = min(c for c, _ in rows)
    last = max(f for _, f in rows)
    latencies = sorted((f - c).total_seconds() * 1000 for c, f in rows)
    return {
        "queued": queued,
        "runs": runs,
        "per_s": round(runs / max((last - first).total_seconds(), 1e-6), 1),
        "latency_ms_p50": round(latencies[len(latencies) // 2], 1),
        "latency_ms_p99": round(latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))], 1),
    }


def run(quick: bool = True, publish: bool = True) -> dict[str, Any]:
    os.environ["WEFT_QUEUES"] = json.dumps(QUEUES)  # this process (the producer) too
    common.ensure_database()
    common.setup_django()
    from django.db import connections

    from weft_django.engine.workflow.definitions import registry
    from weft_django.kernel.queue_spec import parse_queues
    from weft_django.models import EngineRecord
    from weft_django.ownership.slots import live_slots

    assert "three-steps" in registry.workflows
    runs, trials = (200, 2) if quick else (1000, 3)
    lat_runs, seeded = (100, 500) if quick else (500, 2000)
    machine = common.Machine()
    common.reset_tables()
    connections.close_all()
    env = {"WEFT_QUEUES": json.dumps(QUEUES)}
    tag = uuid.uuid4().hex[:6]
    workers = [
        children.weft_worker(f"bench-q{tag}-{i}", "--queues", QUEUE, env=env)
        for i in range(ENGINES)
    ]
    results: list[dict[str, Any]] = []
    try:
        wait_for(
            f"{ENGINES} engines to boot",
            lambda: EngineRecord.objects.filter(stopped_at__isnull=True).count() >= ENGINES,
            *workers,
            timeout=120,
            interval=0.05,
        )
        time.sleep(0.5)
        for _ in range(trials):
            for queued in (False, True):
                results.append(_trial(runs, queued, workers))
                print(f"# {results[-1]}", file=sys.stderr, flush=True)
        left = live_slots(parse_queues(QUEUES)[0][QUEUE], "default").count()
    finally:
        children.stop_all(workers)
        connections.close_all()
    admission = {
        "latency": queue_admission.latency(lat_runs, env),
        "cpu": [queue_admission.cpu(seeded, limit) for limit in (1, 10)],
    }
    print(f"# {admission}", file=sys.stderr, flush=True)
    plain = statistics.median(r["per_s"] for r in results if not r["queued"])
    queued = statistics.median(r["per_s"] for r in results if r["queued"])
    ratio = round(queued / plain, 3) if plain else 0.0
    return common.document(
        "queues",
        mode="quick" if quick else "full",
        figures={
            "trials": results,
            "queued_per_s_median": queued,
            "live_slots_left": left,
            "admission": admission,
        },
        baseline={"unqueued_per_s_median": plain},
        ratio={
            "headline": "start→complete throughput through a queue with generous limits "
            "÷ without a queue",
            "value": ratio,
            "target": TARGET,
            "met": ratio >= TARGET,
        },
        settings={
            "engines": ENGINES,
            "producer_threads": PRODUCER_THREADS,
            "workflow": "three-steps",
            "queues": QUEUES,
            "runs_per_trial": runs,
            "trials_per_case": trials,
        },
        machine=machine,
        notes=[common.TWO_CORE_NOTE.format(nproc=os.cpu_count())],
    )


def main(argv: list[str] | None = None) -> int:
    return common.simple_main(run, __doc__, argv)


if __name__ == "__main__":
    sys.exit(main())
