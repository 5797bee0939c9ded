"""Bulk operation speed: runs/s of cancel_many / retry_many by filter (issue #20).

N runs are seeded with ``bulk_create`` in the shapes the engine leaves them
(parked runs holding a claim of a live-looking engine, with a search
attribute ``batch``; failed runs with a good journal entry and a failed
one), then, in one process on one connection:

- **dry run**: ``client.cancel_many(filter, dry_run=True)`` over the N;
- **cancel_many**: the N cancelled by an attribute filter (fenced chunks
  of 200: every claim rotated, every run's status condition checked);
- **retry_many**: N failed runs retried by a status + name filter (their
  trailing failed entries dropped);
- **baselines**, in the same run: the first ``--single`` runs of a second
  batch cancelled (and retried) one at a time with ``client.cancel`` /
  ``client.retry`` -- what a loop over the list does; and the *limit*: one
  raw ``UPDATE`` of N runs' status by the same filter (no fence, no claim,
  no history: what the database alone costs).

Reported: runs/s of each, statements per run of the bulk operations, and
the ratios. Quick: 2,000 runs; full: 10,000 (the issue's size). A progress
bar on stderr (the ``progress`` callback) shows the chunks go by.
"""

from __future__ import annotations

import sys
import time
import uuid
from collections.abc import Callable
from typing import Any

from benchmarks import common, stats

SINGLE = 300
NOW_MS = 1_700_000_000_000


def seed_runs(status: str, batch: str, count: int, *, name: str = "bench-bulk") -> list[uuid.UUID]:
    """``count`` runs of workflow ``name`` in ``status`` with the search attribute
    ``batch``, in the shapes the engine leaves (also ``tests/e2e/test_bulk_10k``):
    a parked run holds a live-looking claim of another engine; a failed run has
    a good journal entry and a failed one after it. Returns their pks."""
    from weft_django.models import JournalEntry, RunSearchAttribute, WorkflowClaim, WorkflowRun

    runs = [
        WorkflowRun(
            id=uuid.uuid4(),
            workflow_id=f"{batch}-{i:06d}",
            name=name,
            status=status,
            input={"n": i},
            version=3,
            wake_seq=1,
            parked_seq=1,
        )
        for i in range(count)
    ]
    WorkflowRun.objects.bulk_create(runs, batch_size=2000)
    RunSearchAttribute.objects.bulk_create(
        [
            RunSearchAttribute(run_id=r.pk, name="batch", type="str", str_value=batch, position=0)
            for r in runs
        ],
        batch_size=2000,
    )
    if status == "parked":
        WorkflowClaim.objects.bulk_create(
            [
                WorkflowClaim(
                    workflow_id=r.workflow_id,
                    epoch=1,
                    engine_id=SEEDED_ENGINE,
                    expires_at=NOW_MS * 2,
                    claimed_at=NOW_MS,
                )
                for r in runs
            ],
            batch_size=2000,
        )
    if status == "failed":
        entries = []
        for r in runs:
            entries.append(JournalEntry(run_id=r.pk, position=0, kind="activity", command=0))
            entries.append(
                JournalEntry(
                    run_id=r.pk,
                    position=1,
                    kind="activity",
                    command=1,
                    error={"type": "ValueError", "message": "boom"},
                )
            )
        JournalEntry.objects.bulk_create(entries, batch_size=4000)
    return [r.pk for r in runs]


#: The engine id of the seeded parked runs' claims (alive, not this process).
SEEDED_ENGINE = "engine-elsewhere"


def _bar(label: str) -> Callable[[int, int], None]:
    def show(done: int, total: int) -> None:
        width = 30
        filled = width * done // max(1, total)
        sys.stderr.write(f"\r# {label} [{'#' * filled}{' ' * (width - filled)}] {done:,}/{total:,}")
        if done >= total:
            sys.stderr.write("\n")
        sys.stderr.flush()

    return show


def _timed(fn: Callable[[], Any]) -> tuple[Any, float, int]:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as captured:
        t0 = time.perf_counter()
        result = fn()
        elapsed = time.perf_counter() - t0
    return result, elapsed, len(captured)


def run(
    quick: bool = True, publish: bool = True, runs: int | None = None, single: int | None = None
) -> dict[str, Any]:
    del publish  # no chart
    machine = common.Machine()
    common.ensure_database()
    common.setup_django()
    from django.conf import settings as django_settings
    from django.db.models import Exists, OuterRef
    from django.test import override_settings

    from weft_django import client
    from weft_django.engine.runs.filters import RunFilter
    from weft_django.models import RunSearchAttribute, WorkflowRun

    common.reset_tables()
    count = runs or (2_000 if quick else 10_000)
    one_by_one = min(single or SINGLE, count)
    weft = {**getattr(django_settings, "WEFT", {}), "SEARCH_ATTRIBUTES": {"batch": "str"}}
    with override_settings(WEFT=weft):
        t0 = time.perf_counter()
        seed_runs("parked", "bulk", count)
        seed_runs("parked", "single", one_by_one)
        seed_runs("parked", "raw", count)
        seed_runs("failed", "fail-bulk", count)
        seed_runs("failed", "fail-single", one_by_one)
        seed_s = time.perf_counter() - t0

        bulk = RunFilter(attributes={"batch": "bulk"})
        dry, dry_s, dry_q = _timed(lambda: client.cancel_many(bulk, dry_run=True))
        assert (dry.matched, dry.changed) == (count, count), dry
        cancelled, cancel_s, cancel_q = _timed(
            lambda: client.cancel_many(bulk, reason="bench", progress=_bar("cancel_many"))
        )
        assert cancelled.changed == count, cancelled

        singles = list(
            WorkflowRun.objects.filter(workflow_id__startswith="single-").values_list(
                "workflow_id", flat=True
            )
        )
        t0 = time.perf_counter()
        for wid in singles:
            client.cancel(wid, "bench")
        single_cancel_s = time.perf_counter() - t0

        tagged = RunSearchAttribute.objects.filter(
            run_id=OuterRef("pk"), name="batch", str_value="raw"
        )
        t0 = time.perf_counter()
        raw = WorkflowRun.objects.filter(Exists(tagged)).update(status="cancelled")
        raw_s = time.perf_counter() - t0
        assert raw == count

        failed = RunFilter(status=("failed",), attributes={"batch": "fail-bulk"})
        retried, retry_s, retry_q = _timed(
            lambda: client.retry_many(failed, progress=_bar("retry_many"))
        )
        assert retried.changed == count, retried
        t0 = time.perf_counter()
        for wid in WorkflowRun.objects.filter(workflow_id__startswith="fail-single-").values_list(
            "workflow_id", flat=True
        ):
            client.retry(wid)
        single_retry_s = time.perf_counter() - t0

    def rate(n: int, seconds: float) -> float:
        return stats.rnd(n / seconds, 1)

    cancel_rate, retry_rate = count / cancel_s, count / retry_s
    single_cancel_rate = one_by_one / single_cancel_s
    single_retry_rate = one_by_one / single_retry_s
    raw_rate = count / raw_s
    return common.document(
        "bulk",
        mode="quick" if quick else "full",
        figures={
            "runs": count,
            "dry_run_runs_per_s": rate(count, dry_s),
            "dry_run_statements": dry_q,
            "cancel_many_runs_per_s": stats.rnd(cancel_rate, 1),
            "cancel_many_s": stats.rnd(cancel_s, 2),
            "cancel_many_statements_per_run": stats.rnd(cancel_q / count, 3),
            "cancel_many_chunks": cancelled.chunks,
            "retry_many_runs_per_s": stats.rnd(retry_rate, 1),
            "retry_many_s": stats.rnd(retry_s, 2),
            "retry_many_statements_per_run": stats.rnd(retry_q / count, 3),
            "seed_s": stats.rnd(seed_s, 1),
        },
        baseline={
            "one_by_one_runs": one_by_one,
            "client_cancel_one_by_one_runs_per_s": stats.rnd(single_cancel_rate, 1),
            "client_retry_one_by_one_runs_per_s": stats.rnd(single_retry_rate, 1),
            "raw_update_runs_per_s": stats.rnd(raw_rate, 1),
        },
        ratio={
            "headline": {
                "cancel_many_over_one_by_one": stats.rnd(cancel_rate / single_cancel_rate, 1),
                "retry_many_over_one_by_one": stats.rnd(retry_rate / single_retry_rate, 1),
                "cancel_many_over_raw_update": stats.rnd(cancel_rate / raw_rate, 3),
            },
            "note": "> 1 over one-by-one: chunked fenced batches beat a loop of client calls; "
            "over the raw UPDATE: the share of the database's bare speed kept while "
            "fencing every run (claim rotation, status condition, claim event, wake)",
        },
        settings={"chunk_size": 200, "ownership": "workflow-lease", "filter": bulk.describe()},
        machine=machine,
        notes=[
            "One process, one connection; statements counted with CaptureQueriesContext "
            "(which also times slightly slower than an uncounted run).",
            "Wakes: one on_commit NOTIFY statement per chunk (no engine listens here).",
            "The raw UPDATE writes status only: no claim, no history, no fence -- a limit, "
            "not a competitor.",
        ],
    )


def main(argv: list[str] | None = None) -> int:
    parser = common.size_parser(__doc__)
    parser.add_argument("--runs", type=int, default=None, help="runs per bulk operation")
    parser.add_argument("--single", type=int, default=None, help=f"one-by-one (default {SINGLE})")
    args = parser.parse_args(argv)
    common.emit(
        run(quick=not args.full, publish=not args.no_publish, runs=args.runs, single=args.single)
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
