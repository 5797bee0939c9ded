"""Replay-check speed: live runs replayed per second by the deploy gate (issue #20).

N parked ``bench-replay`` runs (``benchmarks/replay_workflows.py``: five
activities, then a wait, so a journal of five entries each) are written by
an in-process engine, then replayed read-only:

- **ours**: ``engine.replay_check.check_live_runs()`` -- what
  ``manage.py weft_replay_check`` runs: keyset chunks of 200 runs, each
  chunk's journals in one ordered query;
- **baseline**: the same replays with one journal query per run (what a loop
  of ``client.query``-style replays costs: ``store.load_events`` per run).

Reported: runs/s of each (median of 3 interleaved repeats), queries per run
of ours, and their ratio. Quick: 1,000 runs; full: 10,000.
"""

from __future__ import annotations

import statistics
import sys
import time
from typing import Any

from benchmarks import common, stats

REPEATS = 3


def _populate(count: int) -> None:
    from weft_django import client
    from weft_django.testing import WorkflowTestEnvironment

    env = WorkflowTestEnvironment(worker_concurrency=8)
    try:
        for n in range(count):
            client.start("bench-replay", None, workflow_id=f"bench-replay-{n}")
            if n % 200 == 199:
                env.run_until_idle(timeout=600)
        env.run_until_idle(timeout=600)
    finally:
        env.close()


def _ours() -> tuple[float, int, int]:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from weft_django.engine.replay.check import check_live_runs

    with CaptureQueriesContext(connection) as queries:
        t0 = time.perf_counter()
        report = check_live_runs()
        elapsed = time.perf_counter() - t0
    if report.failures:
        raise SystemExit(f"the unchanged code failed its own replay: {report.failures[:3]}")
    return report.checked / elapsed, report.checked, len(queries)


def _baseline() -> float:
    from weft_django.engine.journal import load_events
    from weft_django.engine.replay.machine import Replay
    from weft_django.engine.workflow.definitions import get_workflow
    from weft_django.kernel.clock import now_ms
    from weft_django.models import WorkflowRun

    definition = get_workflow("bench-replay")
    t0 = time.perf_counter()
    count = 0
    rows = WorkflowRun.objects.live().values_list("pk", "workflow_id", "input")
    for pk, workflow_id, input in rows.iterator(chunk_size=200):
        Replay(
            definition,
            workflow_id=workflow_id,
            run_id=str(pk),
            input=input,
            events=load_events(pk, "default"),
            clock_ms=now_ms,
            record=False,
        ).advance()
        count += 1
    return count / (time.perf_counter() - t0)


def run(quick: bool = True, publish: bool = True, runs: int | None = None) -> dict[str, Any]:
    del publish  # no chart
    machine = common.Machine()
    common.ensure_database()
    common.setup_django()
    import benchmarks.replay_workflows  # noqa: F401  (registers bench-replay)
    from weft_django.models import WorkflowRun

    common.reset_tables()
    count = runs or (1_000 if quick else 10_000)
    t0 = time.perf_counter()
    _populate(count)
    populate_s = time.perf_counter() - t0
    parked = WorkflowRun.objects.filter(name="bench-replay", status="parked").count()
    if parked != count:
        raise SystemExit(f"{parked} of {count} runs parked")
    ours: list[float] = []
    base: list[float] = []
    queries = checked = 0
    for _ in range(REPEATS):
        rate, checked, queries = _ours()
        ours.append(rate)
        base.append(_baseline())
    ours_rate, base_rate = statistics.median(ours), statistics.median(base)
    return common.document(
        "replay_check",
        mode="quick" if quick else "full",
        figures={
            "runs": count,
            "checked": checked,
            "runs_per_s": stats.rnd(ours_rate, 1),
            "repeats_runs_per_s": [stats.rnd(r, 1) for r in ours],
            "queries": queries,
            "queries_per_run": stats.rnd(queries / max(1, checked), 3),
            "journal_entries_per_run": 5,
            "populate_s": stats.rnd(populate_s, 1),
        },
        baseline={
            "one_journal_query_per_run_runs_per_s": stats.rnd(base_rate, 1),
            "repeats_runs_per_s": [stats.rnd(r, 1) for r in base],
        },
        ratio={
            "headline": {"ours_over_per_run_queries": stats.rnd(ours_rate / base_rate, 2)},
            "note": "> 1: chunked journal reads replay more runs per second",
        },
        settings={"chunk_size": 200, "repeats": REPEATS, "engine": "in-process, fake clock"},
        machine=machine,
        notes=[
            "Read-only: the check writes nothing, so the repeats replay the same store.",
            "Wall clock of this process, which also runs the replays (one core).",
        ],
    )


def main(argv: list[str] | None = None) -> int:
    parser = common.size_parser(__doc__)
    parser.add_argument("--runs", type=int, default=None, help="parked runs (a smoke check)")
    args = parser.parse_args(argv)
    common.emit(run(quick=not args.full, publish=not args.no_publish, runs=args.runs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
