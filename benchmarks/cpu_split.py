"""Where a burst's CPU goes: the engines, PostgreSQL and the machine, per workflow.

The profile behind issue #15's "what bounds it". A burst of ``--runs``
``three-steps`` workflows (``throughput.produce``: 2 producer threads) is
drained by ``--engines`` ``weft_worker``s, each driving ``--concurrency``
turns at once, after WARMUP untimed runs; the CPU time (``/proc/<pid>/stat``,
user + system) of every engine process and of every PostgreSQL process, and the machine's busy time
(``/proc/stat``), are read before the first start and after the last
completion. ``--py-spy PATH`` records engine 0 with ``py-spy record --gil
--threads`` (speedscope format) over the same window; py-spy is a tool, not
a dependency (``pip install py-spy``).

Prints one JSON document (``common.document``): ``figures`` =
``workflows_per_s``, ``window_s``, ``producer_s``, ``engine_cpu_ms_per_workflow``
(each engine, and their sum), ``postgres_cpu_ms_per_workflow``,
``machine_busy_ms_per_workflow`` and ``machine_busy_share`` (busy ÷ cores ×
window: 1.0 is a saturated machine); ``baseline`` = the machine's capacity
in the window (cores × window); ``ratio.value`` = ``machine_busy_share``.

Usage::

    .venv/bin/python -m benchmarks.cpu_split --engines 1 --concurrency 8 --runs 1000
    .venv/bin/python -m benchmarks.cpu_split --engines 4 --py-spy benchmarks/out/engine0.json
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks import children, common, throughput
from devtools.procs import ChildGroup, wait_for

TICK = os.sysconf("SC_CLK_TCK")
#: Untimed runs first, as in ``peers``: the window measures a warm engine.
WARMUP = 50


def process_cpu_s(pid: int) -> float:
    """User + system CPU seconds of one process (0 when it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / TICK


def postgres_cpu_by_pid() -> dict[int, float]:
    """CPU seconds of every process whose command line names postgres, by pid."""
    seen: dict[int, float] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()[:200]
        except OSError:
            continue
        if b"postgres" in cmdline:
            seen[int(entry)] = process_cpu_s(int(entry))
    return seen


def postgres_cpu_delta_s(before: dict[int, float], after: dict[int, float]) -> float:
    """PostgreSQL CPU spent between two snapshots, never negative.

    A backend that exits inside the window takes its CPU with it, so a
    difference of sums can go below zero when other sessions end (a parallel
    test run). Summed per process instead: a process alive at the end counts
    what it spent since the first snapshot (all of it if it is new, or if its
    pid was reused and the counter went back); one that exited counts nothing.
    """
    total = 0.0
    for pid, spent in after.items():
        earlier = before.get(pid, 0.0)
        total += spent - earlier if spent >= earlier else spent
    return total


def machine_busy_s() -> float:
    """Non-idle CPU seconds of the whole machine (``/proc/stat``, all cores)."""
    values = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return (sum(values) - values[3] - values[4]) / TICK  # minus idle and iowait


def run(engines: int, concurrency: int | None, runs: int, py_spy: str | None) -> dict[str, Any]:
    machine = common.Machine()
    url = common.bench_url()
    common.ensure_database(url)
    common.setup_django(url)
    from django.db import connections

    from weft_django.models import WorkflowRun

    common.reset_tables()
    connections.close_all()
    extra = () if concurrency is None else ("--concurrency", str(concurrency))
    workers: list[ChildGroup] = throughput.start_engines("polling", engines, "cpu", extra)
    spy: subprocess.Popen[bytes] | None = None
    try:
        if py_spy:
            binary = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
            argv = [binary, "record", "-p", str(workers[0].proc.pid), "-o", py_spy]
            argv += ["-r", "97", "--gil", "--threads", "-f", "speedscope"]
            spy = subprocess.Popen(
                argv,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            time.sleep(1)
        # Warm up: each engine's threads open their connections, caches fill.
        throughput.produce(WARMUP, "cpu-warm")
        wait_for(
            "the warm-up runs",
            lambda: WorkflowRun.objects.filter(status="completed").count() >= WARMUP,
            *workers,
            timeout=120,
            interval=0.05,
        )
        before = [process_cpu_s(w.proc.pid) for w in workers]
        pg_before, busy_before = postgres_cpu_by_pid(), machine_busy_s()
        started = time.perf_counter()
        producer_s = throughput.produce(runs, "cpu")
        wait_for(
            f"{runs} runs to complete",
            lambda: WorkflowRun.objects.filter(status="completed").count() >= runs + WARMUP,
            *workers,
            timeout=60 + runs,
            interval=0.05,
        )
        window = time.perf_counter() - started
        after = [process_cpu_s(w.proc.pid) for w in workers]
        pg_s = postgres_cpu_delta_s(pg_before, postgres_cpu_by_pid())
        busy_s = machine_busy_s() - busy_before
    finally:
        if spy is not None:
            spy.send_signal(signal.SIGINT)
            spy.wait(60)
        children.stop_all(workers)
        connections.close_all()
    cores = os.cpu_count() or 1
    per = 1000 / runs
    engine_ms = [round((b - a) * per, 2) for a, b in zip(before, after, strict=True)]
    share = round(busy_s / (cores * window), 3)
    return common.document(
        "cpu_split",
        mode="diagnostic",
        figures={
            "workflows_per_s": round(runs / window, 1),
            "window_s": round(window, 2),
            "producer_s": round(producer_s, 2),
            "engine_cpu_ms_per_workflow": engine_ms,
            "engines_cpu_ms_per_workflow": round(sum(engine_ms), 2),
            "postgres_cpu_ms_per_workflow": round(pg_s * per, 2),
            "machine_busy_ms_per_workflow": round(busy_s * per, 2),
            "machine_busy_share": share,
            "py_spy": py_spy,
        },
        baseline={"machine_capacity_s": round(cores * window, 2)},
        ratio={"value": share, "what": "machine busy ÷ (cores × window)"},
        settings={
            "engines": engines,
            "concurrency": concurrency or "default (WORKER_CONCURRENCY)",
            "runs": runs,
        },
        machine=machine,
        notes=[
            common.TWO_CORE_NOTE.format(nproc=cores),
            "CPU per workflow is CPU in the window ÷ runs; the producer (this process) is "
            "in the machine's figure, not in the engines' or PostgreSQL's.",
        ],
        url=url,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--engines", type=int, default=1)
    parser.add_argument("--concurrency", type=int, default=None)
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--py-spy", default=None, metavar="PATH")
    args = parser.parse_args(argv)
    for name in ("engines", "runs"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} {getattr(args, name)!r}: must be at least 1")
    common.emit(run(args.engines, args.concurrency, args.runs, args.py_spy))
    return 0


if __name__ == "__main__":
    sys.exit(main())
