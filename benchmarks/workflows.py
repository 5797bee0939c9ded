"""What the benchmarks add to the processes they start, without touching the project.

- ``bench-sleeper``: one ``ctx.sleep`` and nothing else, so the turn the
  timer wakes is the run's last (its ``finished_at`` is the moment that turn
  commits). The demo has no such workflow; the wake-latency benchmark needs
  one, and the project's own workflows stay what the tests use.
- ``bench.stamp``: a Celery task that only records when its body started
  (wall clock, in a Redis list). Sent to a node's direct queue, with or
  without an ``eta``, it is the raw Celery round trip the Celery wake
  latencies are compared with: whatever a weft wake costs beyond it is
  weft's, not the broker's.
- The runtime benchmark's workflows (``benchmarks/runtime.py``):
  ``bench-signal-loop`` (wait for the signal ``go``, run a trivial activity,
  again: CPU per step against history), ``bench-fanout`` (``ctx.all`` of N
  sleeping activities, or one alone when N is 1: concurrency inside a
  workflow) and ``bench-parked`` (one activity, then a wait that never ends:
  an engine's memory per parked workflow). ``bench-one`` (one trivial
  activity, then done) is the memory benchmark's short workflow
  (``benchmarks/memory.py``). Their activities do nothing but
  return (or sleep), so what is measured is the runtime.
- A ``worker_ready`` handler that prints ``READY_MARK``: the benchmarks run
  Celery nodes at log level WARNING (per-task INFO lines would cost
  throughput), where Celery's own "ready." line is not logged.

Imported by the benchmark process after ``django.setup()``, by Celery nodes
with ``celery worker -I benchmarks.workflows`` and by standalone engines
through ``children.WORKER_LAUNCHER`` (``manage.py`` cannot import it).
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

from celery import shared_task, signals

from weft_django import activity, workflow

READY_MARK = "weft-bench-node-ready"
STAMPS_KEY = "weft-bench:stamps"


@workflow(name="bench-sleeper")
def bench_sleeper(ctx: Any, data: dict[str, Any]) -> Any:
    """Sleeps ``data["seconds"]``; the turn the timer wakes completes the run."""
    yield ctx.sleep(float(data["seconds"]))
    return data.get("id")


@activity(name="bench.trivial")
def bench_trivial(i: int) -> int:
    return i


@activity(name="bench.sleep")
def bench_sleep(i: int, seconds: float) -> int:
    time.sleep(seconds)
    return i


@workflow(name="bench-signal-loop")
def bench_signal_loop(ctx: Any, data: dict[str, Any]) -> Any:
    """``steps`` times: wait for ``go``, then one trivial activity (one step a signal)."""
    done = 0
    for i in range(int(data["steps"])):
        yield ctx.wait_for_signal("go")
        done = yield ctx.run(bench_trivial, i)
    return done


@workflow(name="bench-signal-loop-async")
async def bench_signal_loop_async(ctx: Any, data: dict[str, Any]) -> Any:
    """``bench-signal-loop``'s ``async def`` twin: the same steps, awaited."""
    done = 0
    for i in range(int(data["steps"])):
        await ctx.wait_for_signal("go")
        done = await ctx.run(bench_trivial, i)
    return done


@workflow(name="bench-fanout")
def bench_fanout(ctx: Any, data: dict[str, Any]) -> Any:
    """``width`` sleeping activities under one ``ctx.all`` (one plain ``ctx.run`` when 1)."""
    width, seconds = int(data["width"]), float(data["seconds"])
    if width == 1:
        return [(yield ctx.run(bench_sleep, 0, seconds))]
    results = yield ctx.all(*[ctx.run(bench_sleep, i, seconds) for i in range(width)])
    return list(results)


@workflow(name="bench-one")
def bench_one(ctx: Any, data: dict[str, Any]) -> Any:
    """One trivial activity, then done: the memory benchmark's short workflow."""
    return (yield ctx.run(bench_trivial, int(data.get("i", 0))))


@workflow(name="bench-parked")
def bench_parked(ctx: Any, data: dict[str, Any]) -> Any:
    """One activity, then a wait for a signal nobody sends: parked for good."""
    yield ctx.run(bench_trivial, 0)
    yield ctx.wait_for_signal("never")
    return None


@shared_task(name="bench.stamp", ignore_result=True)
def bench_stamp(sample: str) -> None:
    """Record (sample, wall-clock ms) the moment a pool process runs the body."""
    at_ms = time.time() * 1000
    import redis
    from celery import current_app

    client = redis.Redis.from_url(current_app.conf.broker_url)
    client.rpush(STAMPS_KEY, json.dumps([sample, at_ms]))


@signals.worker_ready.connect(weak=False, dispatch_uid="weft_bench.ready")
def _announce_ready(**_: Any) -> None:
    print(READY_MARK, file=sys.stdout, flush=True)


@workflow(name="bench-event-echo")
def bench_event_echo(ctx: Any, data: dict[str, Any]) -> Any:
    """``samples`` times: wait for ``go``, then ``ctx.set_event(f"e{i}", payload)``
    (the events benchmark, ``benchmarks/events.py``)."""
    for i in range(int(data["samples"])):
        payload = yield ctx.wait_for_signal("go")
        ctx.set_event(f"e{i}", payload)
    return None
