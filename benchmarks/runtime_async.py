"""``async def`` vs generator: CPU per step of twins, interleaved in one engine.

``bench-signal-loop`` and its ``async def`` twin ``bench-signal-loop-async``
run side by side in ONE inline engine; at each history length the measured
steps alternate (a step of one, then of the other), so whatever else loads the
machine loads both alike. A step is one ``client.signal`` then
``run_until_idle()``; its figure is the thread CPU time inside
``engine.drive`` (``runtime.turn_cpu``). Reported: the median of each and
their ratio (async / generator) per history, with the cache on and off.
Target: <= 1.1.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from benchmarks import common, stats

GENERATOR = "bench-signal-loop"
ASYNC = "bench-signal-loop-async"
TARGET = 1.1
CHUNK = 200


def interleaved(cache_size: int, histories: Sequence[int], window: int) -> dict[str, Any]:
    from django.db import transaction

    from benchmarks.runtime import make_engine, turn_cpu
    from weft_django import client

    common.reset_tables()
    engine, cache = make_engine(cache_size, background_tasks="manual")
    steps = max(histories) + window + 1
    ids = {GENERATOR: f"twin-gen-{cache_size}", ASYNC: f"twin-async-{cache_size}"}
    for name, wid in ids.items():
        client.start(name, {"steps": steps}, workflow_id=wid)
    done = 0
    points: dict[str, Any] = {}
    try:
        engine.boot()
        engine.run_until_idle(timeout=60)
        with turn_cpu(engine) as turns:
            for history in histories:
                first = max(done, history - window // 2)
                while done < first:
                    chunk = min(CHUNK, first - done)
                    with transaction.atomic():
                        for _ in range(chunk):
                            for wid in ids.values():
                                client.signal(wid, "go", None)
                    engine.run_until_idle(timeout=600)
                    done += chunk
                samples: dict[str, list[float]] = {GENERATOR: [], ASYNC: []}
                for step in range(window):
                    order = (GENERATOR, ASYNC) if step % 2 == 0 else (ASYNC, GENERATOR)
                    for name in order:
                        client.signal(ids[name], "go", None)
                        turns.clear()
                        engine.run_until_idle(timeout=120)
                        samples[name].append(sum(turns) * 1000)
                    done += 1
                gen, coro = stats.median(samples[GENERATOR]), stats.median(samples[ASYNC])
                points[str(history)] = {
                    "generator_turn_cpu_ms": round(gen, 3),
                    "async_turn_cpu_ms": round(coro, 3),
                    "ratio": round(coro / gen, 3),
                }
    finally:
        engine.dispose(grace=0)
    return {"cache": cache, "cache_size": cache_size, "points": points}


def compare(histories: Sequence[int], window: int, cache_size: int) -> dict[str, Any]:
    """Both cache variants; ``met`` when every ratio is within ``TARGET``."""
    variants = {
        "cache_off": interleaved(0, histories, window),
        "cache_on": interleaved(cache_size, histories, window),
    }
    ratios = [
        point["ratio"]
        for doc in variants.values()
        if doc["cache"] != "unavailable"
        for point in doc["points"].values()
    ]
    return {**variants, "target": f"<= {TARGET}", "met": all(r <= TARGET for r in ratios)}


__all__ = ["compare", "interleaved"]
