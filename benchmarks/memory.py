"""Memory: one engine's RSS while it runs 100,000 short workflows (10,000 quick).

One ``weft_worker`` engine (its own process) drives ``bench-one`` workflows
(one trivial activity, then done) that this process starts with
``client.start`` — in batches, keeping at most ``BACKLOG`` runs pending so
the engine is never starved nor flooded. Every ``total / SAMPLES`` completed
workflows the engine's ``VmRSS`` (``/proc/<pid>/status``) is sampled.

Figures: the RSS curve; the slope after warm-up (the first ``WARMUP`` of the
runs: imports, caches and pools filling) in KiB per 1,000 workflows, a
least-squares fit; RSS at the end of warm-up (10,000 workflows in a full
run) and at the end. The baseline is the engine's own RSS at the end of
warm-up: ratio = RSS at the end / RSS after warm-up. Target: flat, ≤ 1.10
(a per-run leak of even 1 KiB would add ~90 MiB over a full run).

Not part of ``all``: a full run takes longer than the rest together.
"""

from __future__ import annotations

import sys
import time
import uuid
from typing import Any

from benchmarks import children, common
from devtools.procs import wait_for

WARMUP = 0.10
SAMPLES = 50
BACKLOG = 1_000
BATCH = 200
TARGET = 1.10


def rss_kib(pid: int) -> int:
    """``VmRSS`` of process ``pid``, KiB."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for pid {pid}")


def slope_per_1000(points: list[tuple[int, int]]) -> float:
    """Least-squares slope of RSS (KiB) against completed workflows, per 1,000."""
    n = len(points)
    if n < 2:
        return 0.0
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    sxy = sum((x - mx) * (y - my) for x, y in points)
    return 1000 * sxy / sxx if sxx else 0.0


def drive(total: int, pid: int, worker: Any, tag: str) -> list[dict[str, Any]]:
    """Start ``total`` runs against a bounded backlog; sample the engine's RSS."""
    from django.db import connection

    from weft_django import client

    every = max(1, total // SAMPLES)
    samples = [{"completed": 0, "rss_kib": rss_kib(pid), "t_s": 0.0}]
    started = completed = 0
    next_sample = every
    begun = time.monotonic()
    deadline = begun + 120 + total * 0.1
    with connection.cursor() as cursor:
        while completed < total:
            if started - completed < BACKLOG and started < total:
                for i in range(started, min(total, started + BATCH)):
                    client.start("bench-one", {"i": i}, workflow_id=f"{tag}-{i}")
                started = min(total, started + BATCH)
            cursor.execute(
                "SELECT count(*) FILTER (WHERE status = 'completed'), "
                "count(*) FILTER (WHERE status IN ('failed', 'cancelled', 'timed_out', "
                "'suspended')) FROM weft_workflowrun"
            )
            completed, bad = cursor.fetchone()
            if bad:
                raise RuntimeError(f"{bad} runs did not complete (see the engine's log)")
            while completed >= next_sample and next_sample <= total:
                samples.append(
                    {
                        "completed": int(completed),
                        "rss_kib": rss_kib(pid),
                        "t_s": round(time.monotonic() - begun, 1),
                    }
                )
                next_sample += every
                print(f"# {samples[-1]}", file=sys.stderr, flush=True)
            if not worker.alive():
                raise RuntimeError(f"the engine exited:\n{worker.log()[-3000:]}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"{completed} of {total} runs completed in time")
            if started - completed >= BACKLOG or started >= total:
                time.sleep(0.2)  # the engine is busy; nothing to start yet
    return samples


def run(quick: bool, publish: bool = True) -> dict[str, Any]:
    machine = common.Machine()
    url = common.bench_url()
    common.ensure_database(url)
    common.setup_django(url)
    from django.db import connections

    from weft_django.models import EngineRecord

    common.reset_tables()
    connections.close_all()
    total = 10_000 if quick else 100_000
    tag = f"mem-{uuid.uuid4().hex[:6]}"
    worker = children.weft_worker(f"bench-{tag}")
    try:
        wait_for(
            "the engine to boot",
            lambda: EngineRecord.objects.filter(stopped_at__isnull=True).exists(),
            worker,
            timeout=120,
            interval=0.05,
        )
        began = time.monotonic()
        samples = drive(total, worker.proc.pid, worker, tag)
        wall = time.monotonic() - began
    finally:
        children.stop_all([worker])
    connections.close_all()

    warm = int(total * WARMUP)
    after_warmup = [(s["completed"], s["rss_kib"]) for s in samples if s["completed"] >= warm]
    at_warm = after_warmup[0][1]
    at_end = samples[-1]["rss_kib"]
    ratio_value = round(at_end / at_warm, 3)
    slope = round(slope_per_1000(after_warmup), 1)
    figures = {
        "workflows": total,
        "rss_mib_at_boot": round(samples[0]["rss_kib"] / 1024, 1),
        f"rss_mib_at_{warm}": round(at_warm / 1024, 1),
        f"rss_mib_at_{total}": round(at_end / 1024, 1),
        "rss_mib_peak": round(max(s["rss_kib"] for s in samples) / 1024, 1),
        "slope_kib_per_1000_workflows_after_warmup": slope,
        "workflows_per_s": round(total / wall, 1),
        "wall_s": round(wall, 1),
        "curve": samples,
    }
    ratio = {
        "headline": f"engine RSS at {total} workflows / at {warm} (end of warm-up)",
        "value": ratio_value,
        "target": f"<= {TARGET} (flat)",
        "met": ratio_value <= TARGET,
    }
    notes = [
        "One engine process (weft_worker, polling transport, LISTEN on) runs every workflow; "
        "this process only starts them (client.start, one transaction each) and samples "
        "the engine's VmRSS.",
        f"Warm-up: the first {int(WARMUP * 100)}% of the workflows; the slope is a "
        "least-squares fit of RSS against completed workflows over the samples after it.",
        "RSS is what the kernel reports: CPython's allocator keeps freed arenas, so a flat "
        "curve after warm-up (not a return to the boot figure) is what 'no leak' looks like.",
        "Finished runs stay in the database (no retention during the run): a growing table "
        "must not mean a growing engine.",
    ]
    return common.document(
        "memory",
        mode="quick" if quick else "full",
        figures=figures,
        baseline={f"rss_mib_at_{warm}": round(at_warm / 1024, 1)},
        ratio=ratio,
        settings={
            "workflows": total,
            "workflow": "bench-one (one trivial activity)",
            "samples": SAMPLES,
            "warmup_fraction": WARMUP,
            "backlog": BACKLOG,
            "start_batch": BATCH,
            "database": url,
        },
        machine=machine,
        notes=notes,
        url=url,
        pngs=[_plot(samples, warm, publish)],
    )


def _plot(samples: list[dict[str, Any]], warm: int, publish: bool) -> str:
    plt = common.pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    xs = [s["completed"] for s in samples]
    ax.plot(xs, [s["rss_kib"] / 1024 for s in samples], marker=".", label="engine VmRSS")
    ax.axvline(warm, color="grey", linestyle=":", label="end of warm-up")
    ax.set_xlabel("completed workflows")
    ax.set_ylabel("RSS (MiB)")
    ax.set_ylim(bottom=0)
    ax.set_title("One engine's memory over short workflows")
    ax.grid(alpha=0.3)
    ax.legend()
    path = common.publish_png(fig, "memory", publish)
    plt.close(fig)
    return path


def main(argv: list[str] | None = None) -> int:
    return common.simple_main(run, __doc__, argv)


if __name__ == "__main__":
    sys.exit(main())
