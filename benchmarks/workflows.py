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

from weft_django import workflow

READY_MARK = "weft-bench-node-ready"
STAMPS_KEY = "weft-bench:stamps"


@workflow(name="bench-sleeper")
def bench_sleeper(ctx: Any, data: dict[str, Any]) -> Any:
    """Sleeps ``data["seconds"]``; the turn the timer wakes completes the run."""
    yield ctx.sleep(float(data["seconds"]))
    return data.get("id")


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
