"""Wake and takeover latency, each as a distribution with a baseline from the same run.

1. **Signal wake (cross-engine)**: a ``signal-wait`` run parks;
   ``client.signal`` from this process (a client, not the owner) → the
   owner's turn commits the run (its ``finished_at``). Three modes, one
   engine per block, blocks alternating: a ``weft_worker`` with NOTIFY (the
   default), one with ``--no-listen`` (polling alone, POLL_INTERVAL 0.2 s),
   and one Celery node (``celery -A project worker``; this process installs
   the transport, so the signal's commit sends ``weft.drive`` to the owner
   node's direct queue). Baselines: a raw LISTEN/NOTIFY round trip (psycopg,
   autocommit NOTIFY → ``notifies()`` on another connection), sampled
   between the blocks; for polling the floor is half the poll interval on
   average; for Celery a raw ``send_task`` to the same node's direct queue →
   the task body starting (``bench.stamp``). Target: Celery p99 ≤ 100 ms.
2. **Timer wake**: ``bench-sleeper`` runs (a sleep and nothing else,
   ``benchmarks/workflows.py``), timers staggered so none queues: the
   timer's ``fire_at`` → the woken turn commits the run. Same three modes;
   Celery's baseline is the lateness of a raw ``bench.stamp`` sent with an
   ``eta`` (body start − eta). Target: Celery p99 ≤ 50 ms.
3. **Start → first activity**: ``client.start("three-steps")`` (the run's
   ``created_at``) → its first activity's side-effect row (``SideEffect.at``),
   same three modes.
4. **Takeover after SIGKILL** (``WEFT_TEST_TIMINGS=1``: CLAIM_TTL 3 s,
   CLAIM_RENEW_INTERVAL 1 s): engine A owns K parked runs, engine B is up;
   A's process group is SIGKILLed; per run, the time until B's ``takeover``
   ClaimEvent. This is the TTL path (``WEFT_SESSION_PRESENCE=0``). Floor:
   CLAIM_TTL + 2 × CLAIM_RENEW_INTERVAL (the expiry rule ``expires_at + 2 ×
   renew < now``, from A's last renewal, which happened up to one renew
   interval before the kill); bound: that plus one scan (POLL_INTERVAL).
5. **Takeover after SIGKILL, default settings** (CLAIM_TTL 30 s, renew 5 s,
   SESSION_PRESENCE on): the same trial; A's database session ends with the
   process, B's presence watch sees it and takes the claims over before they
   expire. Target (issue #15): p99 <= 1 s from the kill to B's takeover;
   compared with the TTL path's bound with these settings (TTL + 2 × renew =
   40 s). ``--modes takeover`` runs only 4 and 5.

Times are wall-clock on one machine: ``created_at``/``finished_at``/
``SideEffect.at`` are written by the processes that did the work
(``timezone.now()``), ``ClaimEvent.at_ms`` by the engine clock, and the
signal and kill instants by this process.

Over 400 lines on purpose: one benchmark (its cases, their baselines, the chart) read
top to bottom; the shared parts live in ``common``, ``stats`` and ``children``.
"""

from __future__ import annotations

import os
import signal
import sys
import time
import uuid
from typing import Any

from benchmarks import children, common, stats
from devtools.procs import ChildGroup, wait_for

POLL_INTERVAL_MS = 200
TEST_TTL_MS = 3_000
TEST_RENEW_MS = 1_000
MODES = ("notify", "polling", "celery")
#: ``--modes takeover``: only the two takeover cases (TTL path, session path).
TAKEOVER_MODE = "takeover"
DEFAULT_TTL_MS = 30_000
DEFAULT_RENEW_MS = 5_000
FAST_TAKEOVER_TARGET_MS = 1_000
#: The TTL path with the short timings: session presence off.
TTL_PATH_ENV = {"WEFT_TEST_TIMINGS": "1", "WEFT_SESSION_PRESENCE": "0"}
#: The defaults (and session presence on, its default).
DEFAULT_ENV: dict[str, str] = {}
WARMUP = 2  # signal wakes per block run first and not counted
TIMER_BASE_MS = 2_500  # the first sleeper's sleep: every start has parked by then
TIMER_GUARD_MS = 50  # a timer due sooner after the last park is not counted
RAW_ETA_MS = 300  # how far ahead the raw Celery eta baseline schedules its first task
STAGGER_MS = 150  # between consecutive timers: > one wake turn, so none queues
#: Timers of a standalone engine are found by its poll whether it LISTENs or not
#: (NOTIFY carries client writes, not due timers): timed in the polling block only.
TIMER_MODES = ("polling", "celery")
CELERY_TIMER_TARGET_MS = 50
CELERY_SIGNAL_TARGET_MS = 100


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


# -- baseline: raw Celery -----------------------------------------------------------------


def celery_round_trips(app: Any, node: str, samples: int, eta_ms: float | None) -> list[float]:
    """Raw Celery round trips in ms: ``send_task("bench.stamp")`` to the node's
    direct queue (the queue a ``weft.drive`` takes) → the task body starts in a
    pool process. With ``eta_ms`` each message carries an ``eta`` that far
    ahead (staggered by STAGGER_MS so they do not queue behind each other) and
    the figure is body start − eta: Celery's own timer precision, the floor of
    a timer wake through Celery."""
    import json

    import redis
    from celery.utils.nodenames import worker_direct

    from benchmarks.workflows import STAMPS_KEY

    queue = worker_direct(node)
    r = redis.Redis.from_url(children.broker_url())
    r.delete(STAMPS_KEY)
    due: dict[str, float] = {}
    out: list[float] = []
    if eta_ms is None:
        for i in range(samples):
            sid = f"raw-{i}"
            due[sid] = time.time() * 1000
            app.send_task("bench.stamp", args=[sid], queue=queue)
            got = r.blpop([STAMPS_KEY], timeout=10)
            if got is None:
                raise TimeoutError("bench.stamp did not run within 10 s")
            name, at_ms = json.loads(got[1])
            out.append(at_ms - due[name])
            time.sleep(0.01)
        return out
    from datetime import UTC, datetime

    base = time.time() * 1000 + eta_ms
    for i in range(samples):
        sid = f"eta-{i}"
        due[sid] = base + i * STAGGER_MS
        eta = datetime.fromtimestamp(due[sid] / 1000, tz=UTC)
        app.send_task("bench.stamp", args=[sid], queue=queue, eta=eta)
    for _ in range(samples):
        got = r.blpop([STAMPS_KEY], timeout=10 + (samples * STAGGER_MS + eta_ms) / 1000)
        if got is None:
            raise TimeoutError("a bench.stamp with an eta did not run")
        name, at_ms = json.loads(got[1])
        out.append(at_ms - due[name])
    return out


# -- wakes ------------------------------------------------------------------------------


def start_engine(mode: str, tag: str) -> ChildGroup:
    """One booted, idle engine: a ``weft_worker`` (NOTIFY on, or ``--no-listen``)
    or a Celery node (``celery -A project worker``, one engine)."""
    from weft_django.models import EngineRecord

    if mode == "celery":
        children.flush_broker()
        node = children.celery_node(f"bench-lat-{tag}")
        children.wait_celery_ready([node])
        return node
    extra = ("--no-listen",) if mode == "polling" else ()
    worker = children.weft_worker(f"bench-lat-{tag}", *extra)
    wait_for(
        "the engine to boot",
        lambda: EngineRecord.objects.exists(),
        worker,
        timeout=120,
        interval=0.05,
    )
    return worker


def signal_wake(i: int, tag: str, worker: ChildGroup) -> float:
    """Start a ``signal-wait`` run, let it park, signal it from this process (a
    client, not its owner): ms from the signal's commit to the run's completion."""
    from weft_django import client
    from weft_django.models import WorkflowRun

    wid = f"wake-{tag}-{i}"
    handle = client.start("signal-wait", {"id": wid}, workflow_id=wid)
    run = WorkflowRun.objects.filter(pk=handle.run_id)
    wait_for(
        "the run to park",
        lambda: run.filter(status="parked").exists(),
        worker,
        timeout=30,
        interval=0.005,
    )
    time.sleep(0.05)  # let the parking turn finish its bookkeeping
    t0 = time.time() * 1000
    client.signal(wid, "go", i)
    wait_for(
        "the signal's turn",
        lambda: run.filter(status="completed").exists(),
        worker,
        timeout=30,
        interval=0.002,
    )
    finished = run.values_list("finished_at", flat=True).get()
    return _ms(finished) - t0


def timer_wakes(k: int, tag: str, worker: ChildGroup) -> tuple[list[float], int]:
    """K ``bench-sleeper`` runs, their timers due TIMER_BASE_MS + i × STAGGER_MS
    after the start (staggered: one wake at a time, no queueing): ms from each
    timer's ``fire_at`` to the completion its turn commits. A timer due before
    every sleeper had parked (plus TIMER_GUARD_MS) would measure queueing
    behind the parking turns, not a wake: it is dropped and counted."""
    from weft_django import client
    from weft_django.models import Timer, WorkflowRun

    runs = []
    for i in range(k):
        wid = f"timer-{tag}-{i}"
        seconds = (TIMER_BASE_MS + i * STAGGER_MS) / 1000
        runs.append(client.start("bench-sleeper", {"id": wid, "seconds": seconds}, workflow_id=wid))
    ids = [h.run_id for h in runs]
    fire_at: dict[str, int] = {}

    def all_parked() -> bool:
        # Read while they wait: a timer's row goes once it fired.
        rows = Timer.objects.filter(run_id__in=ids).values_list("run_id", "fire_at")
        fire_at.update({str(r): int(f) for r, f in rows})
        return (
            len(fire_at) >= k
            and WorkflowRun.objects.filter(pk__in=ids, status="parked").count() >= k
        )

    wait_for(f"{k} sleepers to park", all_parked, worker, timeout=30, interval=0.01)
    parked_ms = time.time() * 1000
    finished_rows = WorkflowRun.objects.filter(pk__in=ids)
    wait_for(
        f"{k} timer wakes",
        lambda: finished_rows.filter(status="completed").count() >= k,
        worker,
        timeout=30 + k * STAGGER_MS / 1000,
        interval=0.05,
    )
    out: list[float] = []
    dropped = 0
    for pk, finished in finished_rows.values_list("pk", "finished_at"):
        due = fire_at[str(pk)]
        if due < parked_ms + TIMER_GUARD_MS:
            dropped += 1
        else:
            out.append(_ms(finished) - due)
    return out, dropped


def wake_block(mode: str, samples: int, starts: int, timers: int) -> dict[str, list[float]]:
    """One engine in ``mode``: signal wakes, start→first activity, timer wakes
    (and, with Celery, the raw Celery round trips on the same node)."""
    from django.db import connections

    from project.demo.models import SideEffect
    from weft_django import client
    from weft_django.models import WorkflowRun

    common.reset_tables()
    connections.close_all()
    tag = f"{mode}-{uuid.uuid4().hex[:6]}"
    app = children.install_celery() if mode == "celery" else None
    out: dict[str, list[float]] = {"signal": [], "first": [], "timer": []}
    worker: ChildGroup | None = None
    try:
        worker = start_engine(mode, tag)
        time.sleep(0.5)
        for i in range(-WARMUP, samples):  # the first turns of a fresh engine warm it up
            latency = signal_wake(i, tag, worker)
            if i >= 0:
                out["signal"].append(latency)
        for i in range(starts):
            wid = f"first-{tag}-{i}"
            handle = client.start("three-steps", {"id": wid}, workflow_id=wid)
            run = WorkflowRun.objects.filter(pk=handle.run_id)
            wait_for(
                "the run to complete",
                lambda r=run: r.filter(status="completed").exists(),
                worker,
                timeout=30,
                interval=0.01,
            )
            created = run.values_list("created_at", flat=True).get()
            first = SideEffect.objects.filter(kind="reserve", key=wid).order_by("at").first()
            assert first is not None
            out["first"].append(_ms(first.at) - _ms(created))
            time.sleep(0.02)
        if mode in TIMER_MODES:
            out["timer"], dropped = timer_wakes(timers, tag, worker)
            out["timer_dropped"] = [float(dropped)]
        if app is not None:
            node = worker.node  # type: ignore[attr-defined]
            out["raw_celery"] = celery_round_trips(app, node, samples, None)
            out["raw_celery_eta"] = celery_round_trips(app, node, timers, RAW_ETA_MS)
    finally:
        if worker is not None:
            worker.stop()
        if app is not None:
            children.uninstall_celery(app)
        connections.close_all()
    return out


# -- takeover ---------------------------------------------------------------------------------


def takeover_trial(k: int, timings: dict[str, str]) -> list[float]:
    from django.db import connections

    from weft_django import client
    from weft_django.models import ClaimEvent, EngineRecord, WorkflowClaim, WorkflowRun

    common.reset_tables()
    connections.close_all()
    tag = uuid.uuid4().hex[:6]
    a = children.weft_worker(f"bench-owner-{tag}", env=timings)
    b: ChildGroup | None = None
    try:
        wait_for(
            "engine A to boot",
            lambda: EngineRecord.objects.filter(pk=a.name).exists(),
            a,
            timeout=120,
            interval=0.05,
        )
        wids = [f"take-{tag}-{i}" for i in range(k)]
        for wid in wids:
            client.start("signal-wait", {"id": wid}, workflow_id=wid)
        wait_for(
            f"{k} runs parked and held by A",
            lambda: (
                WorkflowRun.objects.filter(status="parked").count() >= k
                and WorkflowClaim.objects.filter(engine_id=a.name).count() >= k
            ),
            a,
            timeout=60 + k,
            interval=0.05,
        )
        b = children.weft_worker(f"bench-taker-{tag}", env=timings)
        wait_for(
            "engine B to boot",
            lambda: EngineRecord.objects.filter(pk=b.name).exists(),
            a,
            b,
            timeout=120,
            interval=0.05,
        )
        time.sleep(0.3)
        killed_ms = time.time() * 1000
        a.signal_group(signal.SIGKILL)
        wait_for(
            f"B to take over {k} runs",
            lambda: ClaimEvent.objects.filter(kind="takeover", engine_id=b.name).count() >= k,
            b,
            timeout=60,
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


def takeover_cases(quick: bool) -> dict[str, Any]:
    """Both takeover cases: the TTL path (short timings) and the session path
    (default timings); figures, baselines and headlines."""
    trials, k = (2, 20) if quick else (5, 100)
    ttl_path: list[float] = []
    fast: list[float] = []
    per_trial_max: list[float] = []
    fast_per_trial_max: list[float] = []
    for _ in range(trials):
        sample = takeover_trial(k, TTL_PATH_ENV)
        ttl_path += sample
        per_trial_max.append(round(max(sample), 1))
        sample = takeover_trial(k, DEFAULT_ENV)
        fast += sample
        fast_per_trial_max.append(round(max(sample), 1))
    floor_ms = TEST_TTL_MS + 2 * TEST_RENEW_MS
    bound_ms = floor_ms + POLL_INTERVAL_MS
    default_ttl_bound_ms = DEFAULT_TTL_MS + 2 * DEFAULT_RENEW_MS
    d_take = stats.distribution(ttl_path)
    d_fast = stats.distribution(fast)
    p99_fast = d_fast["p99"]
    return {
        "trials": trials,
        "k": k,
        "ttl_path": ttl_path,
        "fast": fast,
        "floor_ms": floor_ms,
        "bound_ms": bound_ms,
        "figures": {
            "takeover_after_sigkill_ms": {
                **d_take,
                "per_trial_max": per_trial_max,
                "workflows_per_trial": k,
                "trials": trials,
                "path": "TTL (SESSION_PRESENCE off; TTL 3 s, renew 1 s)",
            },
            "takeover_after_sigkill_default_settings_ms": {
                **d_fast,
                "per_trial_max": fast_per_trial_max,
                "workflows_per_trial": k,
                "trials": trials,
                "path": "session presence (defaults: TTL 30 s, renew 5 s)",
            },
        },
        "baseline": {
            "takeover_floor_ms": floor_ms,
            "takeover_bound_ms": bound_ms,
            "takeover_what": "floor = CLAIM_TTL + 2 × CLAIM_RENEW_INTERVAL (3 s + 2 × 1 s); "
            "bound = floor + one scan (POLL_INTERVAL); a kill lands up to one renew interval "
            "after A's last renewal, so single takeovers can come up to 1 s before the floor",
            "default_settings_ttl_path_bound_ms": default_ttl_bound_ms,
            "default_settings_what": "with the defaults the TTL path would take CLAIM_TTL + "
            "2 × CLAIM_RENEW_INTERVAL = 30 s + 2 × 5 s after A's last renewal",
        },
        "ratio": {
            "takeover_p50_over_floor": stats.rnd(d_take["p50"] / floor_ms, 3),
            "default_takeover_p99_over_1s_target": stats.rnd(p99_fast / FAST_TAKEOVER_TARGET_MS, 3),
            "default_takeover_p99_over_ttl_path_bound": stats.rnd(
                p99_fast / default_ttl_bound_ms, 4
            ),
        },
        "headline": {
            "takeover": {
                "what": "takeover p99 ÷ (CLAIM_TTL + 2 × CLAIM_RENEW_INTERVAL + one scan), "
                "TTL path",
                "value": stats.rnd(d_take["p99"] / bound_ms, 3),
                "target": "<= 1 (every workflow taken over within the bound)",
                "met": max(ttl_path) <= bound_ms,
            },
            "takeover_default_settings_p99_ms": {
                "what": "kill → takeover p99 with the default settings (session presence)",
                "value": p99_fast,
                "target": f"<= {FAST_TAKEOVER_TARGET_MS}",
                "met": p99_fast <= FAST_TAKEOVER_TARGET_MS,
            },
        },
    }


def run_takeover(quick: bool) -> dict[str, Any]:
    """``--modes takeover``: the two takeover cases alone."""
    machine = common.Machine()
    url = common.bench_url()
    common.ensure_database(url)
    common.setup_django(url)
    cases = takeover_cases(quick)
    common.reset_tables()
    return common.document(
        "latency",
        mode="quick" if quick else "full",
        figures=cases["figures"],
        baseline=cases["baseline"],
        ratio={**cases["ratio"], "headline": cases["headline"]},
        settings={
            "modes": [TAKEOVER_MODE],
            "takeover_trials": cases["trials"],
            "parked_workflows_per_trial": cases["k"],
            "engine": "two weft_workers per trial: WEFT_TEST_TIMINGS=1 with "
            "WEFT_SESSION_PRESENCE=0 (TTL path), then the defaults (session presence)",
            "poll_interval_ms": POLL_INTERVAL_MS,
            "database": url,
        },
        machine=machine,
        notes=[common.TWO_CORE_NOTE.format(nproc=os.cpu_count())],
        url=url,
    )


# -- the benchmark --------------------------------------------------------------------------


def run(quick: bool, publish: bool = True, modes: tuple[str, ...] = MODES) -> dict[str, Any]:
    machine = common.Machine()
    url = common.bench_url()
    common.ensure_database(url)
    common.setup_django(url)
    blocks = 1 if quick else 3
    wakes_per_block, starts_per_block, timers_per_block = (20, 10, 20) if quick else (40, 20, 40)

    got: dict[str, dict[str, list[float]]] = {
        m: {"signal": [], "first": [], "timer": []} for m in modes
    }
    raw: list[float] = []
    raw_celery: dict[str, list[float]] = {"raw_celery": [], "raw_celery_eta": []}
    dropped = {m: 0 for m in modes if m in TIMER_MODES}
    for b in range(blocks):
        order = modes if b % 2 == 0 else modes[::-1]
        for mode in order:
            raw += notify_round_trips(wakes_per_block)
            block = wake_block(mode, wakes_per_block, starts_per_block, timers_per_block)
            for kind in ("signal", "first", "timer"):
                got[mode][kind] += block[kind]
            if mode in dropped:
                dropped[mode] += int(sum(block["timer_dropped"]))
            for kind in raw_celery:
                raw_celery[kind] += block.get(kind, [])
    raw += notify_round_trips(wakes_per_block)
    cases = takeover_cases(quick)
    trials, k, takeovers = cases["trials"], cases["k"], cases["ttl_path"]
    common.reset_tables()

    floor_ms, bound_ms = cases["floor_ms"], cases["bound_ms"]
    d_wakes = {m: stats.distribution(got[m]["signal"]) for m in modes}
    d_timer = {m: stats.distribution(got[m]["timer"]) for m in modes if m in TIMER_MODES}
    d_first = {m: stats.distribution(got[m]["first"]) for m in modes}
    d_raw = stats.distribution(raw, digits=3)
    figures = {
        "signal_wake_ms": d_wakes,
        "timer_wake_ms": d_timer,
        "timer_wakes_dropped": dropped,
        "start_to_first_activity_ms": d_first,
        **cases["figures"],
    }
    baseline: dict[str, Any] = {
        "raw_listen_notify_round_trip_ms": d_raw,
        "polling_floor_ms": {
            "mean": POLL_INTERVAL_MS / 2,
            "max": POLL_INTERVAL_MS,
            "what": "a wake waits for the next poll: uniform in [0, POLL_INTERVAL]",
        },
        **cases["baseline"],
    }
    if "celery" in modes:
        baseline["raw_celery_round_trip_ms"] = {
            **stats.distribution(raw_celery["raw_celery"], digits=2),
            "what": "send_task to the node's direct queue → task body starts in a pool process",
        }
        baseline["raw_celery_eta_lateness_ms"] = {
            **stats.distribution(raw_celery["raw_celery_eta"], digits=2),
            "what": "task body start − eta, same node and queue (Celery's timer precision)",
        }

    def over(a: float | None, b: float | None, digits: int = 2) -> float | None:
        return None if a is None or not b else stats.rnd(a / b, digits)

    ratio: dict[str, Any] = dict(cases["ratio"])
    if "notify" in modes:
        ratio["signal_wake_notify_p50_over_raw_notify_p50"] = over(
            d_wakes["notify"]["p50"], d_raw["p50"], 1
        )
    if "polling" in modes:
        ratio["signal_wake_polling_mean_over_polling_floor_mean"] = over(
            d_wakes["polling"]["mean"], POLL_INTERVAL_MS / 2
        )
        ratio["timer_wake_polling_mean_over_polling_floor_mean"] = over(
            d_timer["polling"]["mean"], POLL_INTERVAL_MS / 2
        )
    if "notify" in modes and "polling" in modes:
        ratio["signal_wake_polling_p50_over_notify_p50"] = over(
            d_wakes["polling"]["p50"], d_wakes["notify"]["p50"]
        )
        ratio["start_first_activity_polling_p50_over_notify_p50"] = over(
            d_first["polling"]["p50"], d_first["notify"]["p50"]
        )
    headline: dict[str, Any] = dict(cases["headline"])
    if "celery" in modes:
        raw_rt = baseline["raw_celery_round_trip_ms"]
        raw_eta = baseline["raw_celery_eta_lateness_ms"]
        ratio["signal_wake_celery_p50_over_raw_celery_p50"] = over(
            d_wakes["celery"]["p50"], raw_rt["p50"], 1
        )
        ratio["timer_wake_celery_p50_over_raw_celery_eta_p50"] = over(
            d_timer["celery"]["p50"], raw_eta["p50"], 1
        )
        if "polling" in modes:
            ratio["signal_wake_celery_p99_over_polling_p99"] = over(
                d_wakes["celery"]["p99"], d_wakes["polling"]["p99"]
            )
            ratio["timer_wake_celery_p99_over_polling_p99"] = over(
                d_timer["celery"]["p99"], d_timer["polling"]["p99"]
            )
        for name, dist, target in (
            ("celery_timer_wake_p99_ms", d_timer["celery"], CELERY_TIMER_TARGET_MS),
            ("celery_signal_wake_p99_ms", d_wakes["celery"], CELERY_SIGNAL_TARGET_MS),
        ):
            headline[name] = {
                "what": f"{name.replace('_', ' ')} (p99 over {dist['n']} samples)",
                "value": dist["p99"],
                "target": f"<= {target}",
                "met": dist["p99"] is not None and dist["p99"] <= target,
            }
    ratio["headline"] = headline
    pngs = [_plot(got, raw, raw_celery, takeovers, floor_ms, bound_ms, publish, cases["fast"])]
    return common.document(
        "latency",
        mode="quick" if quick else "full",
        figures=figures,
        baseline=baseline,
        ratio=ratio,
        settings={
            "modes": list(modes),
            "blocks_per_mode": blocks,
            "signal_wakes_per_block": wakes_per_block,
            "warmup_signal_wakes_per_block": WARMUP,
            "starts_per_block": starts_per_block,
            "timer_wakes_per_block": timers_per_block,
            "timer_modes": [m for m in modes if m in TIMER_MODES],
            "timer_first_sleep_ms": TIMER_BASE_MS,
            "timer_stagger_ms": STAGGER_MS,
            "takeover_trials": trials,
            "parked_workflows_per_trial": k,
            "engine": "one engine per block: a weft_worker (default settings; --no-listen "
            "for polling) or one Celery node; takeover: two weft_workers with "
            "WEFT_TEST_TIMINGS=1 and WEFT_SESSION_PRESENCE=0 (TTL path), then two with "
            "the defaults (session presence)",
            "celery": {
                "node": f"celery -A project worker -P {children.CELERY_POOL} "
                f"-c {children.CELERY_CONCURRENCY} -l WARNING --without-mingle "
                "--without-gossip --without-heartbeat",
                "broker": children.broker_url(),
                "weft": "defaults: CLAIM_RENEW_INTERVAL 5 s (the polling backstop), "
                "CELERY_ETA_HORIZON 60 s",
            }
            if "celery" in modes
            else None,
            "poll_interval_ms": POLL_INTERVAL_MS,
            "claim_ttl_ms": TEST_TTL_MS,
            "claim_renew_interval_ms": TEST_RENEW_MS,
            "database": url,
        },
        machine=machine,
        notes=[
            "Each signal wake is sequential (start, park, signal, complete): no queueing.",
            "Signal wake = client.signal committed in this process (a client, not the "
            "owner; with Celery it sends weft.drive to the owner node's direct queue on "
            "commit) → the resumed turn's terminal write (finished_at, stamped just before "
            "its commit).",
            "Timer wake = the sleep's Timer.fire_at → the woken turn's finished_at "
            "(bench-sleeper: a sleep and nothing else, from benchmarks/workflows.py). "
            f"The timers of one block are staggered {STAGGER_MS} ms apart so none waits "
            "behind another; with Celery each sleep is an eta message sent by the turn "
            "that parks (due within CELERY_ETA_HORIZON). A timer due less than "
            f"{TIMER_GUARD_MS} ms after the last sleeper parked is dropped "
            "(timer_wakes_dropped): it would time the parking turns' queue, not a wake.",
            "Raw Celery baselines run on the same node after the weft samples: "
            "bench.stamp (benchmarks/workflows.py) records the wall clock its body starts.",
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
    got: dict[str, dict[str, list[float]]],
    raw: list[float],
    raw_celery: dict[str, list[float]],
    takeovers: list[float],
    floor_ms: int,
    bound_ms: int,
    publish: bool,
    fast: list[float] | None = None,
) -> str:
    fast = fast or []
    plt = common.pyplot()
    fig, axes = plt.subplots(1, 4, figsize=(20, 4.2))
    labels = {
        "notify": "LISTEN/NOTIFY",
        "polling": "polling (--no-listen)",
        "celery": "Celery node",
    }
    ax = axes[0]
    for mode, kinds in got.items():
        _cdf(ax, kinds["signal"], f"signal wake, {labels[mode]}")
    _cdf(ax, raw, "baseline: raw NOTIFY round trip", linestyle="--")
    _cdf(ax, raw_celery["raw_celery"], "baseline: raw Celery round trip", linestyle="--")
    if "celery" in got:
        ax.axvline(CELERY_SIGNAL_TARGET_MS, color="red", linestyle=":", label="Celery p99 target")
    ax.set_xscale("log")
    ax.set_xlabel("ms (log)")
    ax.set_title("signal (non-owner client) → owner's turn committed")
    ax = axes[1]
    for mode, kinds in got.items():
        if mode in TIMER_MODES:
            _cdf(ax, kinds["timer"], f"timer wake, {labels[mode]}")
    _cdf(ax, raw_celery["raw_celery_eta"], "baseline: raw Celery eta lateness", linestyle="--")
    if "celery" in got:
        ax.axvline(CELERY_TIMER_TARGET_MS, color="red", linestyle=":", label="Celery p99 target")
    ax.set_xscale("log")
    ax.set_xlabel("ms (log)")
    ax.set_title("timer due → turn committed")
    ax = axes[2]
    for mode, kinds in got.items():
        _cdf(ax, kinds["first"], labels[mode])
    ax.set_xscale("log")
    ax.set_xlabel("ms (log)")
    ax.set_title("client.start → first activity")
    ax = axes[3]
    _cdf(ax, [t / 1000 for t in takeovers], "takeover after SIGKILL, TTL path")
    _cdf(ax, [t / 1000 for t in fast], "takeover after SIGKILL, defaults (session presence)")
    ax.axvline(floor_ms / 1000, color="grey", linestyle="--", label="TTL + 2 × renew")
    ax.axvline(bound_ms / 1000, color="red", linestyle=":", label="+ one scan (bound)")
    ax.set_xlabel("s")
    ax.set_title("takeover: TTL path (TTL 3 s, renew 1 s) and session presence (defaults)")
    for a in axes:
        a.set_ylabel("fraction of samples")
        a.set_ylim(0, 1.02)
        a.grid(alpha=0.3, which="both")
        a.legend(fontsize=7, loc="lower right")
    fig.suptitle("weft-django latency CDFs on PostgreSQL", y=1.03)
    path = common.publish_png(fig, "latency", publish)
    plt.close(fig)
    return path


def main(argv: list[str] | None = None) -> int:
    parser = common.size_parser(__doc__)
    parser.add_argument(
        "--modes",
        default=",".join(MODES),
        help=f"comma-separated subset of {','.join(MODES)} (default: all; the takeover "
        f"cases run with any), or {TAKEOVER_MODE!r} alone for the takeover cases only",
    )
    args = parser.parse_args(argv)
    modes = tuple(m for m in args.modes.split(",") if m)
    if modes == (TAKEOVER_MODE,):
        common.emit(run_takeover(quick=not args.full))
        return 0
    unknown = set(modes) - set(MODES)
    if unknown:
        parser.error(f"unknown modes: {', '.join(sorted(unknown))}")
    common.emit(run(quick=not args.full, publish=not args.no_publish, modes=modes))
    return 0


if __name__ == "__main__":
    sys.exit(main())
