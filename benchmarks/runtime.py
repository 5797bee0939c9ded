"""The runtime (issue #14): CPU per step against history, fan-out, memory of parked runs.

Three measurements, each against a baseline taken in the same run:

1. **CPU per step** of ``bench-signal-loop`` (wait for the signal ``go``,
   run a trivial activity, again) at a history of 10, 1,000 and 5,000 steps
   (two journal entries a step). One in-process engine, inline
   (``run_until_idle`` on this thread, no background threads): a step is one
   ``client.signal`` then ``run_until_idle()``. The figure is the CPU time of
   this thread (``time.thread_time``) inside ``engine.drive`` -- the turns
   only, not the maintenance passes (those are reported beside it as
   ``pass_cpu_ms``, the whole ``run_until_idle``). Median over a window of
   ``--window`` steps centred on each history length. The history is
   fast-forwarded with real turns too: signals are sent in batches of
   ``FAST_FORWARD_CHUNK`` (one transaction each) and one turn consumes the
   whole batch, so one replay covers many steps. Baseline: the step at
   history 10. Target: the step at 5,000 costs <= 1.2 x the step at 10.
   Run with the workflow cache on (``Engine(workflow_cache_size=N)``) and
   off (size 0); an engine without the cache refuses the override
   (``ImproperlyConfigured: Unknown weft override``): the "off" variant then
   runs on the default engine (which has no cache) and "on" is reported as
   ``"cache": "unavailable"``. Then ``bench-signal-loop`` and its ``async
   def`` twin run side by side, their steps interleaved
   (``benchmarks.runtime_async``); ``ratio.async_vs_generator`` is the twin's
   step CPU over the generator's at each history, same run. Target: <= 1.1.
2. **Fan-out**: wall time from ``client.start`` to ``handle.result()`` of
   ``bench-fanout`` -- ``ctx.all`` of 8 activities sleeping 200 ms -- against
   one such activity alone, on a started (background) engine of this
   process, interleaved, median of the repeats. Target: <= 1.5 x.
3. **Engine RSS** with 10,000 (``--quick``: 1,000) ``bench-parked``
   workflows (one activity, then a wait that never ends) driven to parked by
   ONE inline engine, with the cache on (size >= the count) and off (size
   0). This process starts the runs; each variant's engine lives in a fresh
   subprocess (``--rss-child``) so the variants share no heap. Figures:
   ``VmRSS`` of ``/proc/self/status`` after ``gc.collect()``, at boot and
   once every run is parked; the baseline is the cache-off engine; the cost
   of a cached workflow is the difference over the count.

Usage: ``python -m benchmarks runtime [--quick|--full]`` (the same sizes of
history both ways; ``--quick`` parks 1,000 runs, ``--full`` 10,000).
"""

from __future__ import annotations

import argparse
import gc
import json
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from benchmarks import common, runtime_async, stats

HISTORIES = (10, 1_000, 5_000)
WINDOW = 20
FAST_FORWARD_CHUNK = 200
STEP_TARGET = 1.2
FANOUT_WIDTH = 8
FANOUT_SECONDS = 0.2
FANOUT_TARGET = 1.5
PARKED_QUICK = 1_000
PARKED_FULL = 10_000
CACHE_SIZE = 1_000  # the CPU variants' cache: more than the one workflow they drive
UNKNOWN_OVERRIDE = "Unknown weft override"


# -- the engine, with or without the cache ------------------------------------------------


def make_engine(cache_size: int | None, **overrides: Any) -> tuple[Any, str]:
    """``Engine(workflow_cache_size=cache_size, **overrides)`` and how it was built.

    Returns ``(engine, state)``: ``"on"``/``"off"`` when the engine took the
    override; ``"unavailable"`` when this build has no cache (the override
    is unknown) and the engine is the default one; ``None`` asks for no cache
    override at all. Any other refused override (a bad value) is raised."""
    from django.core.exceptions import ImproperlyConfigured

    from weft_django.engine import Engine

    if cache_size is None:
        return Engine(**overrides), "default"
    try:
        return Engine(workflow_cache_size=cache_size, **overrides), "on" if cache_size else "off"
    except ImproperlyConfigured as exc:
        if UNKNOWN_OVERRIDE not in str(exc) or "workflow_cache_size" not in str(exc):
            raise
        return Engine(**overrides), "unavailable"


def optional_overrides(**wanted: Any) -> tuple[dict[str, Any], dict[str, str]]:
    """The subset of ``wanted`` overrides this build knows (``ACTIVITY_CONCURRENCY``
    may not exist yet), and a note for each one dropped."""
    from weft_django.conf import DEFAULTS

    kept = {k: v for k, v in wanted.items() if k.upper() in DEFAULTS}
    dropped = {k: "unknown in this build" for k in wanted if k not in kept}
    return kept, dropped


@contextmanager
def turn_cpu(engine: Any) -> Iterator[list[float]]:
    """Record the thread CPU time (s) of every ``engine.drive`` call (one turn each).

    Wraps the instance attribute: the scheduler calls ``self.engine.drive``."""
    samples: list[float] = []
    real = engine.drive

    def drive(*args: Any, **kwargs: Any) -> Any:
        t0 = time.thread_time()
        try:
            return real(*args, **kwargs)
        finally:
            samples.append(time.thread_time() - t0)

    engine.drive = drive
    try:
        yield samples
    finally:
        del engine.drive


# -- 1. CPU per step against history ------------------------------------------------------


def cpu_per_step(
    cache_size: int,
    histories: Sequence[int],
    window: int,
    tag: str,
    workflow: str = "bench-signal-loop",
) -> dict[str, Any]:
    """Drive one ``workflow`` (``bench-signal-loop`` or its async twin) through
    ``histories``; measure ``window`` steps at each."""
    from django.db import transaction

    from weft_django import client
    from weft_django.models import JournalEntry

    common.reset_tables()
    engine, cache = make_engine(cache_size, background_tasks="manual")
    if cache == "unavailable" and cache_size > 0:
        return {"cache": "unavailable"}
    workflow_id = f"bench-loop-{tag}"
    steps_total = max(histories) + window + 1
    handle = client.start(workflow, {"steps": steps_total}, workflow_id=workflow_id)
    done = 0  # steps the workflow has completed
    points: dict[str, Any] = {}
    fast_forward_s = 0.0
    try:
        engine.boot()
        engine.run_until_idle(timeout=60)
        with turn_cpu(engine) as turns:
            for history in histories:
                first = max(done, history - window // 2)
                t0 = time.monotonic()
                while done < first:
                    chunk = min(FAST_FORWARD_CHUNK, first - done)
                    with transaction.atomic():
                        for _ in range(chunk):
                            client.signal(workflow_id, "go", None)
                    engine.run_until_idle(timeout=600)
                    done += chunk
                fast_forward_s += time.monotonic() - t0
                turn_ms: list[float] = []
                pass_ms: list[float] = []
                turns_per_step: set[int] = set()
                for _ in range(window):
                    client.signal(workflow_id, "go", None)
                    turns.clear()
                    t1 = time.thread_time()
                    engine.run_until_idle(timeout=120)
                    pass_ms.append((time.thread_time() - t1) * 1000)
                    turn_ms.append(sum(turns) * 1000)
                    turns_per_step.add(len(turns))
                    done += 1
                entries = JournalEntry.objects.filter(run__pk=handle.run_id).count()
                points[str(history)] = {
                    "steps_measured": [first, done],
                    "journal_entries_after": entries,
                    "turn_cpu_ms": round(stats.median(turn_ms), 2),
                    "turn_cpu_ms_all": [round(x, 2) for x in turn_ms],
                    "pass_cpu_ms": round(stats.median(pass_ms), 2),
                    "turns_per_step": sorted(turns_per_step),
                }
        status = handle.status()
    finally:
        engine.dispose(grace=0)
    if status != "parked":
        raise RuntimeError(f"{workflow} {workflow_id} is {status!r}, expected parked")
    return {
        "cache": cache,
        "cache_size": cache_size,
        "points": points,
        "fast_forward_s": round(fast_forward_s, 1),
    }


def step_ratios(points: dict[str, Any], histories: Sequence[int]) -> dict[str, float]:
    base = points[str(histories[0])]["turn_cpu_ms"]
    return {
        f"step@{h}/step@{histories[0]}": round(points[str(h)]["turn_cpu_ms"] / base, 3)
        for h in histories[1:]
    }


# -- 2. fan-out -------------------------------------------------------------------------


def fanout(width: int, seconds: float, repeats: int) -> dict[str, Any]:
    """Start→result wall time of ``width`` sleeping activities under ``ctx.all`` vs one."""
    from weft_django import client

    common.reset_tables()
    overrides, dropped = optional_overrides(activity_concurrency=max(width, 1))
    engine, _ = make_engine(None, **overrides)
    samples: dict[str, list[float]] = {"one": [], "all": []}
    try:
        engine.start()
        for r in range(repeats + 1):  # the first round warms up (plans, imports)
            order = ("one", "all") if r % 2 == 0 else ("all", "one")
            for kind in order:
                data = {"width": 1 if kind == "one" else width, "seconds": seconds}
                t0 = time.perf_counter()
                handle = client.start("bench-fanout", data, workflow_id=f"bench-fan-{kind}-{r}")
                result = handle.result(timeout=60 + width * seconds * 4)
                elapsed = time.perf_counter() - t0
                if len(result) != data["width"]:
                    raise RuntimeError(f"bench-fanout returned {result!r}")
                if r:
                    samples[kind].append(elapsed * 1000)
    finally:
        engine.dispose(grace=5)
    one, fan = stats.median(samples["one"]), stats.median(samples["all"])
    return {
        "width": width,
        "activity_seconds": seconds,
        "repeats": repeats,
        "overrides": {**overrides, **dropped},
        "one_ms": round(one, 1),
        "one_ms_all": [round(x, 1) for x in samples["one"]],
        "all_ms": round(fan, 1),
        "all_ms_all": [round(x, 1) for x in samples["all"]],
        "sequential_would_be_ms": round(width * seconds * 1000, 1),
        "ratio": round(fan / one, 3),
    }


# -- 3. RSS of parked workflows -----------------------------------------------------------


def rss_mib() -> float:
    """``VmRSS`` of this process, MiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def rss_child(cache_size: int, expected: int) -> dict[str, Any]:
    """In a fresh process: one inline engine drives the ``expected`` pending runs to parked."""
    from weft_django.models import WorkflowRun

    gc.collect()
    before = rss_mib()
    engine, cache = make_engine(cache_size, background_tasks="manual")
    t0 = time.monotonic()
    try:
        engine.boot()
        engine.run_until_idle(timeout=3_600)
        parked = WorkflowRun.objects.filter(name="bench-parked", status="parked").count()
        gc.collect()
        after = rss_mib()
    finally:
        engine.dispose(grace=0)
    if parked != expected:
        raise RuntimeError(f"{parked} of {expected} bench-parked runs parked")
    return {
        "cache": cache,
        "cache_size": cache_size,
        "parked": parked,
        "rss_mib_boot": round(before, 1),
        "rss_mib_parked": round(after, 1),
        "drive_s": round(time.monotonic() - t0, 1),
    }


def start_parked(count: int) -> None:
    from django.db import transaction

    from weft_django import client

    common.reset_tables()
    for base in range(0, count, 500):
        with transaction.atomic():
            for k in range(base, min(count, base + 500)):
                client.start("bench-parked", {}, workflow_id=f"bench-parked-{k:05d}")


def rss_variant(cache_size: int, count: int) -> dict[str, Any]:
    start_parked(count)
    argv = [sys.executable, "-m", "benchmarks.runtime", "--rss-child", str(cache_size)]
    argv += ["--parked", str(count)]
    done = subprocess.run(
        argv, cwd=common.REPO_ROOT, env=common.child_env(), capture_output=True, text=True
    )
    if done.returncode != 0:
        raise RuntimeError(f"RSS child (cache {cache_size}) failed:\n{done.stderr[-4000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def rss(count: int) -> dict[str, Any]:
    off = rss_variant(0, count)
    on = rss_variant(count, count) if off["cache"] != "unavailable" else {"cache": "unavailable"}
    figures: dict[str, Any] = {"workflows": count, "cache_off": off, "cache_on": on}
    if on["cache"] == "on":
        figures["mib_per_1000_cached"] = round(
            (on["rss_mib_parked"] - off["rss_mib_parked"]) / count * 1000, 3
        )
        figures["kib_per_cached_workflow"] = round(
            (on["rss_mib_parked"] - off["rss_mib_parked"]) * 1024 / count, 2
        )
    return figures


# -- the document -------------------------------------------------------------------------


def run(
    quick: bool,
    publish: bool = True,
    *,
    histories: Sequence[int] = HISTORIES,
    window: int = WINDOW,
    fanout_width: int = FANOUT_WIDTH,
    fanout_seconds: float = FANOUT_SECONDS,
    fanout_repeats: int | None = None,
    parked: int | None = None,
) -> dict[str, Any]:
    machine = common.Machine()
    url = common.bench_url()
    common.ensure_database(url)
    common.setup_django(url)
    parked = parked or (PARKED_QUICK if quick else PARKED_FULL)
    repeats = fanout_repeats or (5 if quick else 9)

    cpu = {
        "cache_off": cpu_per_step(0, histories, window, "off"),
        "cache_on": cpu_per_step(CACHE_SIZE, histories, window, "on"),
    }
    fan = fanout(fanout_width, fanout_seconds, repeats)
    memory = rss(parked)
    common.reset_tables()

    first, last = histories[0], histories[-1]
    ratio: dict[str, Any] = {}
    for variant, doc in cpu.items():
        if "points" in doc:
            ratio[f"cpu_{variant}"] = step_ratios(doc["points"], histories)
    twins = runtime_async.compare(histories, window, CACHE_SIZE)
    ratio["async_vs_generator"] = {
        f"{variant}@{h}": point["ratio"]
        for variant in ("cache_off", "cache_on")
        for h, point in twins[variant]["points"].items()
    } | {"target": twins["target"], "met": twins["met"]}
    ratio["fanout"] = fan["ratio"]
    headline_variant = "cache_on" if "points" in cpu["cache_on"] else "cache_off"
    value = ratio[f"cpu_{headline_variant}"][f"step@{last}/step@{first}"]
    ratio.update(
        headline=f"turn CPU per step at history {last:,} / at {first} "
        f"({headline_variant.replace('_', ' ')}); fan-out {fanout_width} x "
        f"{fanout_seconds * 1000:.0f} ms / one",
        value=value,
        target=f"<= {STEP_TARGET} (CPU); fan-out <= {FANOUT_TARGET}",
        met=value <= STEP_TARGET and fan["ratio"] <= FANOUT_TARGET,
        cpu_met=value <= STEP_TARGET,
        fanout_met=fan["ratio"] <= FANOUT_TARGET,
    )
    # "off" means the build took Engine(workflow_cache_size=0): the cache exists.
    cache_note = "available" if cpu["cache_off"]["cache"] == "off" else "unavailable"
    figures = {
        "cache": cache_note,
        "cpu_per_step": cpu,
        "async_vs_generator": twins,
        "fanout": fan,
        "rss": memory,
    }
    baseline = {
        f"cpu_{v}_step@{first}_ms": d["points"][str(first)]["turn_cpu_ms"]
        for v, d in cpu.items()
        if "points" in d
    }
    baseline.update(
        fanout_one_ms=fan["one_ms"],
        rss_cache_off_mib=memory["cache_off"]["rss_mib_parked"],
    )
    pngs = [_plot(cpu, fan, histories, publish)]
    return common.document(
        "runtime",
        mode="quick" if quick else "full",
        figures=figures,
        baseline=baseline,
        ratio=ratio,
        settings={
            "histories_steps": list(histories),
            "window_steps": window,
            "fast_forward_chunk": FAST_FORWARD_CHUNK,
            "cpu_cache_size": CACHE_SIZE,
            "fanout": {"width": fanout_width, "seconds": fanout_seconds, "repeats": repeats},
            "parked_workflows": parked,
            "database": url,
            "timing": "CPU: time.thread_time() around each engine.drive (one turn) of an inline "
            "engine on this thread; fan-out: wall clock client.start -> handle.result on a "
            "started engine; RSS: VmRSS after gc.collect(), one fresh process per variant",
        },
        machine=machine,
        notes=[
            "A step is one signal then one turn: the turn consumes the signal, runs the "
            "trivial activity, and parks on the next wait (two journal entries a step).",
            "pass_cpu_ms is the whole run_until_idle of a step (maintenance passes included); "
            "the headline uses turn_cpu_ms, the turns alone.",
            '"cache": "unavailable" means this build refuses Engine(workflow_cache_size=...): '
            "the cache-off figures are then the default engine's, and there is no cache-on run.",
            "Fan-out runs ctx.all on a started engine; activity_concurrency is raised to the "
            "width when the build knows that setting.",
        ],
        url=url,
        pngs=pngs,
    )


def _plot(cpu: dict[str, Any], fan: dict[str, Any], histories: Sequence[int], publish: bool) -> str:
    plt = common.pyplot()
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4), width_ratios=(3, 2))
    for variant, marker in (("cache_off", "s"), ("cache_on", "o")):
        doc = cpu[variant]
        label = variant.replace("_", " ")
        if "points" not in doc:
            left.plot([], [], marker=marker, label=f"{label} (unavailable)")
            continue
        left.plot(
            list(histories),
            [doc["points"][str(h)]["turn_cpu_ms"] for h in histories],
            marker=marker,
            label=label,
        )
    left.set_xlabel("history (steps of signal + activity)")
    left.set_ylabel("CPU per step, ms (median turn)")
    left.set_title("bench-signal-loop on PostgreSQL")
    left.set_ylim(bottom=0)
    left.grid(alpha=0.3)
    left.legend()
    labels = ["one activity", f"ctx.all of {fan['width']}"]
    right.bar(labels, [fan["one_ms"], fan["all_ms"]], color=("tab:gray", "tab:blue"))
    right.axhline(
        fan["sequential_would_be_ms"], linestyle="--", color="tab:red", label="sequential"
    )
    right.axhline(
        fan["one_ms"] * FANOUT_TARGET,
        linestyle=":",
        color="tab:green",
        label=f"target {FANOUT_TARGET} x one",
    )
    right.set_ylabel("start → result, ms (median)")
    right.set_title(f"fan-out, {fan['activity_seconds'] * 1000:.0f} ms activities")
    right.legend()
    path = common.publish_png(fig, "runtime", publish)
    plt.close(fig)
    return path


def _ints(text: str) -> list[int]:
    values = [int(x) for x in text.split(",") if x.strip()]
    if not values or values != sorted(values) or values[0] < 1:
        raise argparse.ArgumentTypeError(f"expected increasing positive integers, got {text!r}")
    return values


def main(argv: list[str] | None = None) -> int:
    parser = common.size_parser(__doc__)
    parser.add_argument(
        "--histories",
        type=_ints,
        default=list(HISTORIES),
        help="history lengths in steps (default 10,1000,5000)",
    )
    parser.add_argument("--window", type=int, default=WINDOW, help="steps measured at each")
    parser.add_argument("--fanout-width", type=int, default=FANOUT_WIDTH)
    parser.add_argument("--fanout-seconds", type=float, default=FANOUT_SECONDS)
    parser.add_argument("--fanout-repeats", type=int, default=None)
    parser.add_argument("--parked", type=int, default=None, help="parked workflows (RSS)")
    parser.add_argument("--rss-child", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.rss_child is not None:
        common.setup_django()
        print(json.dumps(rss_child(args.rss_child, args.parked)), flush=True)
        return 0
    common.emit(
        run(
            quick=not args.full,
            publish=not args.no_publish,
            histories=args.histories,
            window=args.window,
            fanout_width=args.fanout_width,
            fanout_seconds=args.fanout_seconds,
            fanout_repeats=args.fanout_repeats,
            parked=args.parked,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
