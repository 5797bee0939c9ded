"""A per-key rate limit holds across real ``weft_worker`` processes.

Three engines on PostgreSQL share queue ``pkr-proc`` (``per_key_rate`` 2 per
2 s); 6 runs for each of two keys and 2 runs without a key are started, and
one engine is SIGKILLed once admissions are under way. Audited from the slot
rows every admission writes (``QueueSlot``, sampled while the test runs: a
row stays at least the rate window): in no 2 s window were more than 2 runs
of one key admitted on the rate's count, whichever engine admitted them; the
keyless runs were not held back; every run completes.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.db import connection
from django.test import override_settings

from tests.engines.harness import Worker, wait_for
from tests.engines.rate_workflows import IMPORTS, QUEUES, RATE_COUNT, RATE_WINDOW_MS
from weft_django import client
from weft_django.models import QueueSlot, WorkflowClaim, WorkflowRun

pytestmark = [pytest.mark.processes, pytest.mark.django_db(transaction=True)]

DONE_TIMEOUT_S = 180.0  # hang protection only
KEYS = ("ka", "kb")
PER_KEY = 6


def _most_in_window(instants: list[int], window_ms: int) -> int:
    """The most admissions inside any half-open window of ``window_ms``."""
    instants = sorted(instants)
    most, lo = 0, 0
    for hi, at in enumerate(instants):
        while at - instants[lo] >= window_ms:
            lo += 1
        most = max(most, hi - lo + 1)
    return most


def test_most_in_window_counts_a_sliding_window() -> None:
    assert _most_in_window([0, 1999, 2000, 3999], 2000) == 2
    assert _most_in_window([0, 10, 20], 2000) == 3
    assert _most_in_window([], 2000) == 0


@override_settings(WEFT={"QUEUES": QUEUES})
def test_per_key_rate_holds_across_three_engines_with_one_killed(tmp_path: Path) -> None:
    assert connection.vendor == "postgresql"
    env = {"WEFT_QUEUES": json.dumps(QUEUES)}
    workers = [Worker(n, tmp_path, env=env, imports=IMPORTS) for n in ("r-w1", "r-w2", "r-w3")]
    seen: dict[tuple[str, int, object], tuple[str | None, int, bool]] = {}

    def sample() -> None:
        rows = QueueSlot.objects.filter(queue="pkr-proc", position__isnull=True).values_list(
            "workflow_id", "epoch", "run_id", "concurrency_key", "admitted_at", "counts_for_rate"
        )
        for wid, epoch, run_id, key, at, counts in rows:
            seen[(wid, epoch, run_id)] = (key, at, counts)

    def all_done() -> bool:
        sample()
        runs = WorkflowRun.objects.filter(name="rate-step")
        return runs.count() == len(KEYS) * PER_KEY + 2 and all(
            r.status == "completed" for r in runs
        )

    try:
        for worker in workers:
            worker.wait_booted()
        for i in range(PER_KEY):
            for key in KEYS:
                client.start("rate-step", i, workflow_id=f"pkr-{key}-{i}", concurrency_key=key)
        for i in range(2):
            client.start("rate-step", i, workflow_id=f"pkr-free-{i}")

        def admitted_some() -> bool:
            sample()
            return sum(1 for key, _, _ in seen.values() if key in KEYS) >= 3

        wait_for("admissions under way", admitted_some, *workers, timeout=DONE_TIMEOUT_S)
        holders = set(
            WorkflowClaim.objects.filter(workflow_id__startswith="pkr-")
            .exclude(engine_id=None)
            .values_list("engine_id", flat=True)
        )
        victim = next((w for w in workers if w.engine_id in holders), workers[0])
        victim.kill()
        survivors = [w for w in workers if w is not victim]
        wait_for("every run completed", all_done, *survivors, timeout=DONE_TIMEOUT_S, interval=0.05)

        for key in KEYS:
            counted = [at for k, at, counts in seen.values() if k == key and counts]
            assert len(counted) >= PER_KEY, (key, sorted(counted))
            assert _most_in_window(counted, RATE_WINDOW_MS) <= RATE_COUNT, (key, sorted(counted))
            # The limit did hold runs back: 6 admissions at 2 per window span >= 2 windows.
            assert max(counted) - min(counted) >= 2 * RATE_WINDOW_MS, (key, sorted(counted))
        free = [at for k, at, _ in seen.values() if k is None]
        assert len(free) >= 2
        print(
            "\nper-key rate: "
            + ", ".join(
                f"{key}: {sorted(at for k, at, c in seen.values() if k == key and c)}"
                for key in KEYS
            )
        )
    finally:
        for worker in workers:
            worker.kill()
