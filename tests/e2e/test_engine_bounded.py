"""An engine keeps nothing per finished workflow (issue #15: flat RSS).

Invariant protected: once a run is terminal, no in-memory structure of the
engine still holds it — its claim (registry, releasing set, cooldown), its
live generator (workflow cache), its in-flight mark (scheduler) — so an
engine that has run 100,000 workflows is the size of one that has run 100.
Checked two ways: the known per-run structures are empty, and *every*
container reachable from the engine's parts is no larger after 150 more
finished runs than after the first 50 (a new per-run dict would fail it).
``benchmarks/memory.py`` measures the RSS this protects.
"""

from __future__ import annotations

from typing import Any

import pytest

from weft_django import activity, client, workflow
from weft_django.models import WorkflowRun
from weft_django.testing import WorkflowTestEnvironment


@activity()
def bounded_step(i: int) -> int:
    return i + 1


@workflow(name="bounded-one")
def bounded_one(ctx, data):
    return (yield ctx.run(bounded_step, data["i"]))


def _run(env: WorkflowTestEnvironment, first: int, count: int) -> None:
    for i in range(first, first + count):
        client.start("bounded-one", {"i": i}, workflow_id=f"bounded-{i}")
    env.run_until_idle()
    done = WorkflowRun.objects.filter(status="completed").count()
    assert done == first + count


def _parts(env: WorkflowTestEnvironment) -> dict[str, Any]:
    engine = env.engine
    parts: dict[str, Any] = {"engine": engine, "scheduler": engine.scheduler}
    if engine.registry is not None:
        parts.update(
            registry=engine.registry,
            cooldown=engine.registry.cooldown,
            metrics=engine.registry.metrics,
        )
    if engine.workflow_cache is not None:
        parts["workflow_cache"] = engine.workflow_cache
    executor = getattr(engine, "_activity_executor", None)
    if executor is not None:
        parts["activity_executor"] = executor
    return parts


def _container_sizes(env: WorkflowTestEnvironment) -> dict[str, int]:
    """``part.attribute -> len`` of every dict, set, list and deque attribute."""
    sizes: dict[str, int] = {}
    for name, part in _parts(env).items():
        for attr, value in vars(part).items():
            if isinstance(value, dict | set | list | frozenset) or type(value).__name__ == "deque":
                sizes[f"{name}.{attr}"] = len(value)
    return sizes


@pytest.mark.django_db(transaction=True)
def test_finished_runs_leave_no_per_run_state(weft_env: WorkflowTestEnvironment) -> None:
    _run(weft_env, 0, 200)
    engine = weft_env.engine
    assert engine.registry is not None
    assert engine.registry.tracked() == []
    assert not engine.registry._releasing
    assert not engine.registry.cooldown._until
    assert engine.workflow_cache is None or len(engine.workflow_cache) == 0
    assert not getattr(engine.scheduler, "_inflight", set())
    assert engine.inflight == 0


@pytest.mark.django_db(transaction=True)
def test_no_engine_container_grows_with_finished_runs(weft_env: WorkflowTestEnvironment) -> None:
    _run(weft_env, 0, 50)
    early = _container_sizes(weft_env)
    _run(weft_env, 50, 150)
    late = _container_sizes(weft_env)
    grown = {k: (early.get(k, 0), n) for k, n in late.items() if n > early.get(k, 0)}
    assert grown == {}, f"grew with finished runs (after 50, after 200): {grown}"
    assert late, "no container inspected: the engine's parts changed shape"
