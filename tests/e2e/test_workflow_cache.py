"""The workflow cache (issue #14, item 4): a wake feeds only the new events.

A hit resumes the live generator (the body does not re-run); anything that
may have changed the run -- an operator's suspend/resume, a newer claim
epoch, other registered code, the LRU bound -- is a miss, which replays the
journal and ends the same way.
"""

from __future__ import annotations

import pytest

from tests.e2e.helpers import latest
from weft_django import activity, client, workflow
from weft_django.engine.replay.cache import WorkflowCache
from weft_django.engine.workflow.definitions import registry
from weft_django.testing import WorkflowTestEnvironment

BODY_STARTS: list[str] = []


@pytest.fixture(autouse=True)
def _reset():
    BODY_STARTS.clear()


@activity()
def wc_step(n: int) -> int:
    return n + 1


@workflow(name="wc-loop")
def wc_loop(ctx, data):
    BODY_STARTS.append(ctx.workflow_id)
    total = 0
    for _ in range(data["steps"]):
        total += yield ctx.wait_for_signal("go")
        total = yield ctx.run(wc_step, total)
    return total


def _drive(env: WorkflowTestEnvironment, workflow_id: str, steps: int) -> None:
    for n in range(steps):
        client.signal(workflow_id, "go", n)
        env.run_until_idle()


@pytest.mark.django_db(transaction=True)
def test_a_hit_resumes_the_live_generator(weft_env):
    h = client.start("wc-loop", {"steps": 3}, workflow_id="wc-hit")
    weft_env.run_until_idle()
    _drive(weft_env, "wc-hit", 3)
    assert h.result(timeout=1) == 6  # ((0 + 0) + 1 + 1) + 1 + 2 + 1
    assert BODY_STARTS == ["wc-hit"]  # started once, never replayed
    stats = weft_env.engine.workflow_cache.stats()
    assert (stats.hits, stats.misses) == (3, 1)  # the first turn had nothing cached
    assert stats.size == 0  # a finished run leaves nothing behind


@pytest.mark.django_db(transaction=True)
def test_cache_off_replays_every_turn_with_the_same_result():
    env = WorkflowTestEnvironment(workflow_cache_size=0)
    try:
        assert env.engine.workflow_cache is None
        h = client.start("wc-loop", {"steps": 3}, workflow_id="wc-off")
        env.run_until_idle()
        _drive(env, "wc-off", 3)
        assert h.result(timeout=1) == 6
        assert BODY_STARTS == ["wc-off"] * 4  # the first turn, then one replay per wake
    finally:
        env.close()


@pytest.mark.django_db(transaction=True)
def test_an_operator_change_is_a_miss_and_the_replay_ends_the_same(weft_env):
    h = client.start("wc-loop", {"steps": 2}, workflow_id="wc-op")
    weft_env.run_until_idle()
    client.suspend("wc-op", "look at it")
    client.resume("wc-op")
    weft_env.run_until_idle()
    _drive(weft_env, "wc-op", 2)
    assert h.result(timeout=1) == 3
    assert len(BODY_STARTS) == 2  # the resume changed the run's version: one replay
    assert latest("wc-op").status == "completed"


@pytest.mark.django_db(transaction=True)
def test_other_registered_code_is_a_miss(weft_env):
    client.start("wc-loop", {"steps": 1}, workflow_id="wc-code")
    weft_env.run_until_idle()

    def wc_loop_v2(ctx, data):
        BODY_STARTS.append("v2")
        total = yield ctx.wait_for_signal("go")
        return (yield ctx.run(wc_step, total)) * 10

    with registry.swapped("wc-loop", wc_loop_v2):
        _drive(weft_env, "wc-code", 1)
    assert BODY_STARTS == ["wc-code", "v2"]
    assert latest("wc-code").result == 10


@pytest.mark.django_db(transaction=True)
def test_the_lru_bound_evicts_and_an_evicted_run_still_completes():
    env = WorkflowTestEnvironment(workflow_cache_size=2)
    try:
        handles = [
            client.start("wc-loop", {"steps": 1}, workflow_id=f"wc-lru-{i}") for i in range(3)
        ]
        env.run_until_idle()
        cache = env.engine.workflow_cache
        assert isinstance(cache, WorkflowCache)
        assert len(cache) == 2 and cache.stats().evictions == 1
        for i in range(3):
            client.signal(f"wc-lru-{i}", "go", i)
        env.run_until_idle()
        assert [h.result(timeout=1) for h in handles] == [1, 2, 3]
        assert sorted(BODY_STARTS) == ["wc-lru-0", "wc-lru-0", "wc-lru-1", "wc-lru-2"]
    finally:
        env.close()


@pytest.mark.django_db(transaction=True)
def test_a_failed_turn_leaves_no_entry(weft_env, monkeypatch):
    client.start("wc-loop", {"steps": 2}, workflow_id="wc-fail")
    weft_env.run_until_idle()
    cache = weft_env.engine.workflow_cache
    assert len(cache) == 1
    from weft_django.engine.turn import concurrent

    def broken(turn):
        raise RuntimeError("engine bug")

    monkeypatch.setattr(concurrent, "commit_finished", broken)
    monkeypatch.setattr("weft_django.engine.turn.commit_finished", broken)
    client.signal("wc-fail", "go", 1)
    weft_env.run_until_idle()
    assert len(cache) == 0  # the failed turn took the entry and did not put it back
    assert latest("wc-fail").turn_failures == 1


@workflow(name="wc-now-then-wait")
def wc_now_then_wait(ctx, data):
    first = ctx.now()
    got = yield ctx.wait_for_signal("go")
    return {"got": got, "same_instant": ctx.now() == first}


@pytest.mark.django_db(transaction=True)
def test_a_park_that_loses_its_race_keeps_the_recorded_values_for_the_next_commit(
    weft_env, monkeypatch
):
    """The park's batch carries the values the body recorded (``ctx.now``);
    when a signal makes it fail, they must go out with the next commit, or the
    journal would miss them and a replay would diverge."""
    import weft_django.engine.turn as turn_module

    real_park = turn_module.park
    raced: list[bool] = []

    def park_after_a_signal(turn, open_leaves, inbox):
        if not raced:
            raced.append(True)
            client.signal("wc-race", "go", "raced in")  # wake_seq moves: the park fails
        return real_park(turn, open_leaves, inbox)

    monkeypatch.setattr(turn_module, "park", park_after_a_signal)
    h = client.start("wc-now-then-wait", None, workflow_id="wc-race")
    weft_env.run_until_idle()
    assert h.result(timeout=1) == {"got": "raced in", "same_instant": True}
    assert [kind for kind, _ in weft_env.journal("wc-race")] == ["now", "signal", "now"]
