"""The workflow cache on a Celery node (issue #14): its hit rate under the node's routing.

Why a benchmark of its own: a turn resumes the replay its engine cached at
the last park only if it runs in the same engine -- on a node, the same pool
process (prefork) or the same process (threads). Celery gives a message to
whichever pool slot is free; this measures what hit rate that routing gives.

One node per variant (``--variants``, e.g. ``prefork:2,threads:2``: the pool
and its concurrency), ``--workflows`` runs of ``bench-signal-loop`` with
``--steps`` steps. This process is the node's web process (``client``
calls send their wakes as messages). Each round signals every run once
(one transaction, one ``weft.drive`` each) and waits until every run
consumed its signal and parked again, so every step is one turn and the
pool is busy with all the runs at once. The figures are the node's summed
counters (``EngineRecord.metrics``: ``workflow_cache_hits`` /
``workflow_cache_misses``, what ``weft_status`` and ``/metrics`` show).
Baseline: the best possible, ``steps / (steps + 1)`` -- each run's first
turn (its pickup) has nothing cached.

Usage: ``python -m benchmarks.celery_cache [--workflows 50] [--steps 10]
[--variants prefork:2,threads:2]``. Never part of ``all``: it reports a rate,
not a ratio with a target.
"""

from __future__ import annotations

import argparse
import sys
import time
import uuid
from collections.abc import Sequence
from typing import Any

from benchmarks import children, common
from devtools.procs import wait_for

WORKFLOWS = 50
STEPS = 10
VARIANTS = (("prefork", 2), ("threads", 2))
SETTLE_TIMEOUT_S = 120.0  # hang protection only


def settled(run_ids: Sequence[str]) -> int:
    """Runs that consumed every signal sent so far (parked on the next wait, or done)."""
    from django.db.models import F, Q

    from weft_django.models import WorkflowRun

    done = Q(status="completed") | Q(status="parked", parked_seq__gte=F("wake_seq"))
    failed = WorkflowRun.objects.filter(pk__in=run_ids, status__in=("failed", "suspended"))
    if failed.exists():
        raise RuntimeError(f"a run did not survive: {failed.first()}")
    return WorkflowRun.objects.filter(pk__in=run_ids).filter(done).count()


def node_counters(node: str) -> Any:
    from weft_django.models import EngineRecord
    from weft_django.ownership.metrics import ClaimMetricsSnapshot

    record = EngineRecord.objects.filter(node_name=node).order_by("-started_at").first()
    return ClaimMetricsSnapshot.from_json(record.metrics if record is not None else None)


def variant(pool: str, concurrency: int, workflows: int, steps: int) -> dict[str, Any]:
    """One node: start the runs, drive ``steps`` rounds of signals, read its counters."""
    from django.db import connections

    from weft_django import client

    common.reset_tables()
    connections.close_all()
    children.flush_broker()
    tag = f"cc{pool[0]}{concurrency}-{uuid.uuid4().hex[:6]}"
    app = children.install_celery()
    node = children.celery_node(f"bench-{tag}", pool=pool, concurrency=concurrency)
    try:
        children.wait_celery_ready([node])
        started = time.perf_counter()
        handles = [
            client.start("bench-signal-loop", {"steps": steps}, workflow_id=f"{tag}-{i}")
            for i in range(workflows)
        ]
        run_ids = [str(h.run_id) for h in handles]

        def all_settled() -> bool:
            return settled(run_ids) >= workflows

        wait_for("every run parked", all_settled, node, timeout=SETTLE_TIMEOUT_S, interval=0.05)
        for step in range(steps):
            for h in handles:
                client.signal(h.workflow_id, "go", step)
            wait_for(
                f"round {step + 1}", all_settled, node, timeout=SETTLE_TIMEOUT_S, interval=0.05
            )
        wall_s = time.perf_counter() - started
        turns = workflows * (steps + 1)

        def counted() -> bool:
            m = node_counters(node.node)
            return m.workflow_cache_hits + m.workflow_cache_misses >= turns

        # Pool processes add their counters just after each task (after its commit).
        wait_for("the node's counters", counted, node, timeout=30, interval=0.1)
    finally:
        children.stop_all([node])
        children.uninstall_celery(app)
    m = node_counters(node.node)
    looks = m.workflow_cache_hits + m.workflow_cache_misses
    assert all(h.status() == "completed" for h in handles), "a run did not complete"
    connections.close_all()
    return {
        "pool": pool,
        "concurrency": concurrency,
        "turns_expected": turns,
        "looks": looks,
        "hits": m.workflow_cache_hits,
        "misses": m.workflow_cache_misses,
        "hit_rate": round(m.workflow_cache_hits / looks, 3) if looks else None,
        "wall_s": round(wall_s, 2),
        "steps_per_s": round(workflows * steps / wall_s, 1),
    }


def run(
    workflows: int = WORKFLOWS,
    steps: int = STEPS,
    variants: Sequence[tuple[str, int]] = VARIANTS,
) -> dict[str, Any]:
    machine = common.Machine()
    url = common.bench_url()
    common.ensure_database(url)
    common.setup_django(url)
    best = steps / (steps + 1)
    figures = {f"{pool}_{c}": variant(pool, c, workflows, steps) for pool, c in variants}
    common.reset_tables()
    ratio = {
        f"{name}_hit_rate_over_best": round(doc["hit_rate"] / best, 3)
        for name, doc in figures.items()
        if doc["hit_rate"] is not None
    }
    return common.document(
        "celery_cache",
        mode="custom",
        figures=figures,
        baseline={"best_hit_rate": round(best, 3)},
        ratio={"headline": "workflow cache hit rate / best possible", **ratio},
        settings={
            "workflows": workflows,
            "steps": steps,
            "variants": [f"{pool}:{c}" for pool, c in variants],
            "workflow_cache_size": "default (1000 per pool engine)",
            "database": url,
            "broker": children.broker_url(),
        },
        machine=machine,
        notes=[
            "A step is one signal (a weft.drive message to the node) and one turn: the turn "
            "consumes it, runs the trivial activity and parks on the next wait.",
            "Each round signals every run, then waits until all of them parked again.",
            "best_hit_rate: every turn but each run's first (its pickup) could hit.",
        ],
        url=url,
    )


def _variants(text: str) -> list[tuple[str, int]]:
    found = []
    for item in text.split(","):
        pool, _, n = item.strip().partition(":")
        if pool not in ("prefork", "threads", "solo") or not n.isdigit() or int(n) < 1:
            raise argparse.ArgumentTypeError(f"expected pool:concurrency items, got {item!r}")
        found.append((pool, int(n)))
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--workflows", type=int, default=WORKFLOWS)
    parser.add_argument("--steps", type=int, default=STEPS)
    parser.add_argument(
        "--variants",
        type=_variants,
        default=list(VARIANTS),
        help="pool:concurrency items (default prefork:2,threads:2)",
    )
    args = parser.parse_args(argv)
    common.emit(run(args.workflows, args.steps, args.variants))
    return 0


if __name__ == "__main__":
    sys.exit(main())
