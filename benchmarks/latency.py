"""Wake and takeover latency, each as a distribution with a baseline from the same run.

1. **Signal wake**: a ``signal-wait`` run parks; ``client.signal`` from this
   process (a non-owner) → the owner's turn commits the run (its
   ``finished_at``). One ``weft_worker`` with NOTIFY (the default) and one
   with ``--no-listen`` (polling alone, POLL_INTERVAL 0.2 s), in alternating
   blocks. Baseline: a raw LISTEN/NOTIFY round trip (psycopg, autocommit
   NOTIFY → ``notifies()`` on another connection), sampled between the
   blocks; for polling the floor is half the poll interval on average.
2. **Start → first activity**: ``client.start("three-steps")`` (the run's
   ``created_at``) → its first activity's side-effect row (``SideEffect.at``),
   same two modes.
3. **Takeover after SIGKILL** (``WEFT_TEST_TIMINGS=1``: CLAIM_TTL 3 s,
   CLAIM_RENEW_INTERVAL 1 s): engine A owns K parked runs, engine B is up;
   A's process group is SIGKILLed; per run, the time until B's ``takeover``
   ClaimEvent. Floor: CLAIM_TTL + 2 × CLAIM_RENEW_INTERVAL (the expiry rule
   ``expires_at + 2 × renew < now``, from A's last renewal, which happened up to
   one renew interval before the kill); bound (the issue's target): that
   plus one scan (POLL_INTERVAL).

Times are wall-clock on one machine: ``created_at``/``finished_at``/
``SideEffect.at`` are written by the processes that did the work
(``timezone.now()``), ``ClaimEvent.at_ms`` by the engine clock, and the
signal and kill instants by this process.
"""

from __future__ import annotations

import os
import signal
import sys
import time
import uuid
from typing import Any

from benchmarks import common

POLL_INTERVAL_MS = 200
TEST_TTL_MS = 3_000
TEST_RENEW_MS = 1_000
MODES = ("notify", "polling")


def _ms(dt: Any) -> float:
    return float(dt.timestamp() * 1000)


# -- baseline: raw LISTEN/NOTIFY ---------------------------------------------------------


def notify_round_trips(samples: int) -> list[float]:
    """Raw LISTEN/NOTIFY round trips in ms (NOTIFY committed → delivered)."""
    listener = common.pg_connect()
    sender = common.pg_connect()
    channel = f"bench_{uuid.uuid4().hex[:8]}"
    listener.execute(f"LISTEN {channel}")
    out: list[float] = []
    try:
        for i in range(samples):
            t0 = time.perf_counter()
            sender.execute("SELECT pg_notify(%s, %s)", [channel, str(i)])
            for note in listener.notifies(timeout=5, stop_after=1):
                if note.payload == str(i):
                    out.append((time.perf_counter() - t0) * 1000)
            time.sleep(0.01)
    finally:
        listener.close()
        sender.close()
    return out


# -- wakes ------------------------------------------------------------------------------


def wake_block(mode: str, samples: int, starts: int) -> tuple[list[float], list[float]]:
    """One engine in ``mode``: ``samples`` signal wakes, ``starts`` start→first activity."""
    from django.db import connections

    from project.demo.models import SideEffect
    from weft_django import client
    from weft_django.models import EngineRecord, WorkflowRun

    common.reset_tables()
    connections.close_all()
    tag = f"{mode}-{uuid.uuid4().hex[:6]}"
    extra = ("--no-listen",) if mode == "polling" else ()
    worker = common.weft_worker(f"bench-lat-{tag}", *extra)
    wakes: list[float] = []
    firsts: list[float] = []
    try:
        common.wait_until(
            "the engine to boot", lambda: EngineRecord.objects.exists(), 120, [worker]
        )
        time.sleep(0.5)
        for i in range(samples):
            wid = f"wake-{tag}-{i}"
            handle = client.start("signal-wait", {"id": wid}, workflow_id=wid)
            run = WorkflowRun.objects.filter(pk=handle.run_id)
            common.wait_until(
                "the run to park",
                lambda r=run: r.filter(status="parked").exists(),
                30,
                [worker],
                interval=0.005,
            )
            time.sleep(0.05)  # let the parking turn finish its bookkeeping
            t0 = time.time() * 1000
            client.signal(wid, "go", i)
            common.wait_until(
                "the signal's turn",
                lambda r=run: r.filter(status="completed").exists(),
                30,
                [worker],
                interval=0.002,
            )
            finished = run.values_list("finished_at", flat=True).get()
            wakes.append(_ms(finished) - t0)
        for i in range(starts):
            wid = f"first-{tag}-{i}"
            handle = client.start("three-steps", {"id": wid}, workflow_id=wid)
            run = WorkflowRun.objects.filter(pk=handle.run_id)
            common.wait_until(
                "the run to complete",
                lambda r=run: r.filter(status="completed").exists(),
                30,
                [worker],
                interval=0.01,
            )
            created = run.values_list("created_at", flat=True).get()
            first = SideEffect.objects.filter(kind="reserve", key=wid).order_by("at").first()
            assert first is not None
            firsts.append(_ms(first.at) - _ms(created))
            time.sleep(0.02)
    finally:
        worker.stop()
        connections.close_all()
    return wakes, firsts


# -- takeover ---------------------------------------------------------------------------------


def takeover_trial(k: int) -> list[float]:
    from django.db import connections

    from weft_django import client
    from weft_django.models import ClaimEvent, EngineRecord, WorkflowClaim, WorkflowRun

    common.reset_tables()
    connections.close_all()
    tag = uuid.uuid4().hex[:6]
    timings = {"WEFT_TEST_TIMINGS": "1"}
    a = common.weft_worker(f"bench-owner-{tag}", env=timings)
    b: common.Proc | None = None
    try:
        common.wait_until(
            "engine A to boot", lambda: EngineRecord.objects.filter(pk=a.name).exists(), 120, [a]
        )
        wids = [f"take-{tag}-{i}" for i in range(k)]
        for wid in wids:
            client.start("signal-wait", {"id": wid}, workflow_id=wid)
        common.wait_until(
            f"{k} runs parked and held by A",
            lambda: (
                WorkflowRun.objects.filter(status="parked").count() >= k
                and WorkflowClaim.objects.filter(engine_id=a.name).count() >= k
            ),
            60 + k,
            [a],
            interval=0.05,
        )
        b = common.weft_worker(f"bench-taker-{tag}", env=timings)
        common.wait_until(
            "engine B to boot", lambda: EngineRecord.objects.filter(pk=b.name).exists(), 120, [a, b]
        )
        time.sleep(0.3)
        killed_ms = time.time() * 1000
        a.signal_group(signal.SIGKILL)
        common.wait_until(
            f"B to take over {k} runs",
            lambda: ClaimEvent.objects.filter(kind="takeover", engine_id=b.name).count() >= k,
            60,
            [b],
            interval=0.05,
        )
        ats = list(
            ClaimEvent.objects.filter(kind="takeover", engine_id=b.name).values_list(
                "at_ms", flat=True
            )
        )
    finally:
        a.kill()
        a.stop()
        if b is not None:
            b.stop()
        connections.close_all()
    return [at - killed_ms for at in ats]


# -- the benchmark --------------------------------------------------------------------------


def run(quick: bool, publish: bool = True) -> dict[str, Any]:
    machine = common.Machine()
    url = common.bench_url()
    common.ensure_database(url)
    common.setup_django(url)
    blocks = 1 if quick else 3
    wakes_per_block, starts_per_block = (20, 10) if quick else (40, 20)
    trials, k = (2, 20) if quick else (5, 100)

    wakes: dict[str, list[float]] = {m: [] for m in MODES}
    firsts: dict[str, list[float]] = {m: [] for m in MODES}
    raw: list[float] = []
    for b in range(blocks):
        order = MODES if b % 2 == 0 else MODES[::-1]
        for mode in order:
            raw += notify_round_trips(wakes_per_block)
            w, f = wake_block(mode, wakes_per_block, starts_per_block)
            wakes[mode] += w
            firsts[mode] += f
    raw += notify_round_trips(wakes_per_block)
    takeovers: list[float] = []
    per_trial_max: list[float] = []
    for _ in range(trials):
        got = takeover_trial(k)
        takeovers += got
        per_trial_max.append(round(max(got), 1))
    common.reset_tables()

    floor_ms = TEST_TTL_MS + 2 * TEST_RENEW_MS
    bound_ms = floor_ms + POLL_INTERVAL_MS
    d_wakes = {m: common.distribution(wakes[m]) for m in MODES}
    d_first = {m: common.distribution(firsts[m]) for m in MODES}
    d_raw = common.distribution(raw, digits=3)
    d_take = common.distribution(takeovers)
    figures = {
        "signal_wake_ms": d_wakes,
        "start_to_first_activity_ms": d_first,
        "takeover_after_sigkill_ms": {
            **d_take,
            "per_trial_max": per_trial_max,
            "workflows_per_trial": k,
            "trials": trials,
        },
    }
    baseline = {
        "raw_listen_notify_round_trip_ms": d_raw,
        "polling_floor_ms": {
            "mean": POLL_INTERVAL_MS / 2,
            "max": POLL_INTERVAL_MS,
            "what": "a wake waits for the next poll: uniform in [0, POLL_INTERVAL]",
        },
        "takeover_floor_ms": floor_ms,
        "takeover_bound_ms": bound_ms,
        "takeover_what": "floor = CLAIM_TTL + 2 × CLAIM_RENEW_INTERVAL (3 s + 2 × 1 s); "
        "bound = floor + one scan (POLL_INTERVAL); a kill lands up to one renew interval "
        "after A's last renewal, so single takeovers can come up to 1 s before the floor",
    }
    p99_take = d_take["p99"]
    ratio = {
        "signal_wake_notify_p50_over_raw_notify_p50": common.rnd(
            d_wakes["notify"]["p50"] / d_raw["p50"], 1
        ),
        "signal_wake_polling_p50_over_notify_p50": common.rnd(
            d_wakes["polling"]["p50"] / d_wakes["notify"]["p50"], 2
        ),
        "signal_wake_polling_mean_over_polling_floor_mean": common.rnd(
            d_wakes["polling"]["mean"] / (POLL_INTERVAL_MS / 2), 2
        ),
        "start_first_activity_polling_p50_over_notify_p50": common.rnd(
            d_first["polling"]["p50"] / d_first["notify"]["p50"], 2
        ),
        "takeover_p50_over_floor": common.rnd(d_take["p50"] / floor_ms, 3),
        "takeover_p99_over_bound": common.rnd(p99_take / bound_ms, 3),
        "headline": {
            "what": "takeover p99 ÷ (CLAIM_TTL + 2 × CLAIM_RENEW_INTERVAL + one scan)",
            "value": common.rnd(p99_take / bound_ms, 3),
            "target": "<= 1 (every workflow taken over within the bound)",
            "met": max(takeovers) <= bound_ms,
        },
    }
    pngs = [_plot(wakes, firsts, raw, takeovers, floor_ms, bound_ms, publish)]
    return common.document(
        "latency",
        mode="quick" if quick else "full",
        figures=figures,
        baseline=baseline,
        ratio=ratio,
        settings={
            "blocks_per_mode": blocks,
            "signal_wakes_per_block": wakes_per_block,
            "starts_per_block": starts_per_block,
            "takeover_trials": trials,
            "parked_workflows_per_trial": k,
            "engine": "one weft_worker per block (default settings; --no-listen for "
            "polling); takeover: two weft_workers with WEFT_TEST_TIMINGS=1",
            "poll_interval_ms": POLL_INTERVAL_MS,
            "claim_ttl_ms": TEST_TTL_MS,
            "claim_renew_interval_ms": TEST_RENEW_MS,
            "database": url,
        },
        machine=machine,
        notes=[
            "Each wake sample is sequential (start, park, signal, complete): no queueing.",
            "Signal wake = signal committed → the resumed turn's terminal write "
            "(finished_at, stamped just before its commit).",
            "Timer wakes (timer due → turn committed) are not measured: no demo workflow "
            "sleeps alone, and the benchmarks do not add workflows to the project.",
            common.TWO_CORE_NOTE.format(nproc=os.cpu_count()),
        ],
        url=url,
        pngs=pngs,
    )


def _cdf(ax: Any, values: list[float], label: str, **kw: Any) -> None:
    if not values:
        return
    xs = sorted(values)
    ys = [(i + 1) / len(xs) for i in range(len(xs))]
    ax.step(xs, ys, where="post", label=f"{label} (n={len(xs)})", **kw)


def _plot(
    wakes: dict[str, list[float]],
    firsts: dict[str, list[float]],
    raw: list[float],
    takeovers: list[float],
    floor_ms: int,
    bound_ms: int,
    publish: bool,
) -> str:
    plt = common.pyplot()
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    ax = axes[0]
    _cdf(ax, wakes["notify"], "signal wake, LISTEN/NOTIFY")
    _cdf(ax, wakes["polling"], "signal wake, polling (--no-listen)")
    _cdf(ax, raw, "baseline: raw NOTIFY round trip", linestyle="--")
    ax.set_xscale("log")
    ax.set_xlabel("ms (log)")
    ax.set_title("signal → owner's turn committed")
    ax = axes[1]
    _cdf(ax, firsts["notify"], "LISTEN/NOTIFY")
    _cdf(ax, firsts["polling"], "polling (--no-listen)")
    ax.set_xscale("log")
    ax.set_xlabel("ms (log)")
    ax.set_title("client.start → first activity")
    ax = axes[2]
    _cdf(ax, [t / 1000 for t in takeovers], "takeover after SIGKILL")
    ax.axvline(floor_ms / 1000, color="grey", linestyle="--", label="TTL + 2 × renew")
    ax.axvline(bound_ms / 1000, color="red", linestyle=":", label="+ one scan (bound)")
    ax.set_xlabel("s")
    ax.set_title("takeover (TTL 3 s, renew 1 s)")
    for a in axes:
        a.set_ylabel("fraction of samples")
        a.set_ylim(0, 1.02)
        a.grid(alpha=0.3, which="both")
        a.legend(fontsize=8, loc="lower right")
    fig.suptitle("weft-django latency CDFs on PostgreSQL", y=1.03)
    path = common.publish_png(fig, "latency", publish)
    plt.close(fig)
    return path


def main(argv: list[str] | None = None) -> int:
    return common.simple_main(run, __doc__, argv)


if __name__ == "__main__":
    sys.exit(main())
