"""The workflow cache's counters: every turn of an engine with the cache on
counts one hit (it resumed the replay it parked) or one miss (it replayed the
journal); an engine without the cache counts neither."""

from __future__ import annotations

from typing import Any

import pytest

from weft_django import activity, client, workflow
from weft_django.models import EngineRecord
from weft_django.ownership.metrics import ClaimMetricsSnapshot
from weft_django.testing import WorkflowTestEnvironment

pytestmark = pytest.mark.django_db(transaction=True)


@activity()
def cache_metrics_echo(n: int) -> int:
    return n


@workflow(name="cache-metrics-loop")
def cache_metrics_loop(ctx: Any, data: dict[str, Any]) -> Any:
    total = 0
    for _ in range(int(data["steps"])):
        n = yield ctx.wait_for_signal("go")
        total += yield ctx.run(cache_metrics_echo, n)
    return total


def looks(env: WorkflowTestEnvironment) -> tuple[int, int]:
    snap: ClaimMetricsSnapshot = env.engine.metrics.snapshot()
    return snap.workflow_cache_hits, snap.workflow_cache_misses


def step(env: WorkflowTestEnvironment, workflow_id: str, n: int) -> None:
    client.signal(workflow_id, "go", n)
    env.run_until_idle()


def test_a_wake_of_a_parked_run_is_a_hit_and_a_lost_entry_a_miss(weft_env: Any) -> None:
    h = client.start("cache-metrics-loop", {"steps": 4}, workflow_id="cache-metrics-1")
    weft_env.run_until_idle()
    assert looks(weft_env) == (0, 1)  # the first turn: nothing cached yet
    step(weft_env, "cache-metrics-1", 1)
    step(weft_env, "cache-metrics-1", 2)
    assert looks(weft_env) == (2, 1)
    weft_env.engine.workflow_cache.clear()  # a restart, an eviction, another engine
    step(weft_env, "cache-metrics-1", 3)
    assert looks(weft_env) == (2, 2)
    step(weft_env, "cache-metrics-1", 4)
    assert h.status() == "completed"
    assert h.result(timeout=1) == 10
    assert looks(weft_env) == (3, 2)
    # The engine's record carries them (what weft_status and /metrics sum).
    weft_env.engine.heartbeat()
    row = EngineRecord.objects.get(pk=weft_env.engine.engine_id)
    record = ClaimMetricsSnapshot.from_json(row.metrics)
    assert (record.workflow_cache_hits, record.workflow_cache_misses) == (3, 2)


def test_an_engine_without_the_cache_counts_no_look() -> None:
    env = WorkflowTestEnvironment(workflow_cache_size=0)
    try:
        assert env.engine.workflow_cache is None
        client.start("cache-metrics-loop", {"steps": 2}, workflow_id="cache-metrics-2")
        env.run_until_idle()
        step(env, "cache-metrics-2", 1)
        step(env, "cache-metrics-2", 2)
        assert client.get_handle("cache-metrics-2").status() == "completed"
        assert looks(env) == (0, 0)
    finally:
        env.close()
