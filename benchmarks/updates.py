"""Update round trip vs a signal + query polling loop doing the same thing (issue #18).

One ``weft_worker`` (NOTIFY wakes, the default) owns one ``bench-counter``
run (``benchmarks/update_workflows.py``). Samples alternate, on the same
run and so on the same growing history:

- **update**: ``client.update(id, "incr", request_id)`` → it returned the
  handler's answer (validated by a read-only replay here, applied in the
  owner's turn, the answer recorded, the caller woken by ``NOTIFY``);
- **signal + query polling**: ``client.signal(id, "incr", {"id": ...})``,
  then ``client.query(id, "seen")`` every ``POLL_S`` until the query shows
  this request (the pattern issue #18 replaces: every poll replays the
  journal in this process).

Reported: p50/p99 of each (ms, wall clock of this process), their ratio
(polling / update), and how many queries a polling round trip took.
Quick: 30 samples each; full: 200.
"""

from __future__ import annotations

import sys
import time
import uuid
from typing import Any

from benchmarks import children, common, stats
from devtools.procs import wait_for

POLL_S = 0.005
WARMUP = 3

LAUNCHER = children.WORKER_LAUNCHER.replace(
    "import benchmarks.workflows;", "import benchmarks.workflows, benchmarks.update_workflows;"
)


def _worker(name: str) -> Any:
    url = common.bench_url()
    environment = common.child_env(f"{url}?application_name={name}")
    argv = [sys.executable, "-c", LAUNCHER, "weft_worker", "--engine-id", name]
    return children.spawn(name, [*argv, "--grace", "5", "--log-level", "WARNING"], environment)


def run(quick: bool = True, publish: bool = True) -> dict[str, Any]:
    del publish  # no chart
    machine = common.Machine()
    common.ensure_database()
    common.setup_django()
    import benchmarks.update_workflows  # noqa: F401  (client.start and query need it here)
    from weft_django import client
    from weft_django.models import EngineRecord, WorkflowRun

    common.reset_tables()
    samples = 30 if quick else 200
    worker = _worker("bench-updates")
    try:
        wait_for(
            "the engine to boot",
            lambda: EngineRecord.objects.filter(pk="bench-updates").exists(),
            worker,
            timeout=120,
        )
        wid = f"bench-counter-{uuid.uuid4().hex[:8]}"
        handle = client.start("bench-counter", None, workflow_id=wid)
        wait_for(
            "the counter to park",
            lambda: WorkflowRun.objects.filter(pk=handle.run_id, status="parked").exists(),
            worker,
            timeout=120,
        )
        update_ms: list[float] = []
        polling_ms: list[float] = []
        polls: list[int] = []
        for i in range(WARMUP + samples):
            request = f"u-{i}"
            t0 = time.perf_counter()
            client.update(wid, "incr", request, timeout=60)
            elapsed_update = (time.perf_counter() - t0) * 1000
            request = f"s-{i}"
            t0 = time.perf_counter()
            client.signal(wid, "incr", {"id": request})
            count = 0
            deadline = time.monotonic() + 60
            while True:
                count += 1
                if client.query(wid, "seen")["last"] == request:
                    break
                if time.monotonic() > deadline:
                    raise SystemExit(f"signal {request} was never seen")
                time.sleep(POLL_S)
            elapsed_polling = (time.perf_counter() - t0) * 1000
            if i >= WARMUP:
                update_ms.append(elapsed_update)
                polling_ms.append(elapsed_polling)
                polls.append(count)
        client.signal(wid, "stop", None)
        final = handle.result(timeout=60)
    finally:
        children.stop_all([worker])
    update_dist = stats.distribution(update_ms)
    polling_dist = stats.distribution(polling_ms)

    def ratio(key: str) -> float | None:
        u, p = update_dist.get(key), polling_dist.get(key)
        return stats.rnd(p / u, 2) if u and p else None

    return common.document(
        "updates",
        mode="quick" if quick else "full",
        figures={
            "update_round_trip_ms": update_dist,
            "samples": samples,
            "final_count": final,
        },
        baseline={
            "signal_plus_query_polling_ms": polling_dist,
            "poll_interval_s": POLL_S,
            "queries_per_round_trip": stats.distribution([float(n) for n in polls]),
        },
        ratio={
            "headline": {
                "polling_over_update_p50": ratio("p50"),
                "polling_over_update_p99": ratio("p99"),
            },
            "note": "> 1: the update round trip is faster than signal + query polling",
        },
        settings={"engine": "one weft_worker, NOTIFY wakes", "warmup": WARMUP},
        machine=machine,
        notes=[
            "Samples alternate update / signal+polling on the same run, so both see the "
            "same history; the history grows by a few journal entries per sample.",
            "Wall clock of the benchmark process; the engine is a separate process on "
            "the same machine.",
        ],
    )


def main(argv: list[str] | None = None) -> int:
    return common.simple_main(run, __doc__, argv)


if __name__ == "__main__":
    sys.exit(main())
