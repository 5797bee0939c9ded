"""The replay-check benchmark's workflow (``benchmarks/replay_check.py``).

``bench-replay``: ``STEPS`` trivial activities, then a wait that never ends,
so a run parks with a journal of ``STEPS`` entries -- the shape of a live
run a deploy gate replays. Imported by the benchmark process after
``django.setup()`` (no engine process: the runs are driven in-process).
"""

from __future__ import annotations

from typing import Any

from weft_django import activity, workflow

STEPS = 5


@activity(name="bench.replay-step")
def bench_replay_step(i: int) -> int:
    return i + 1


@workflow(name="bench-replay")
def bench_replay(ctx: Any, data: Any) -> Any:
    total = 0
    for i in range(STEPS):
        total += yield ctx.run(bench_replay_step, i)
    yield ctx.wait_for_signal("never")
    return total
