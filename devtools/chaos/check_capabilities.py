"""The audits of the soak's newer capabilities (issue #21), from durable records.

Each protects one promise of the product, checked from what the engines
committed (never from their logs or counters, which faults cut short):

- schedules fire each tick exactly once: the runs the schedule started,
  keyed by their nominal tick (their idempotency key), hold no tick twice and
  no gap from the first tick to the last while the schedule was active
  (``schedule_ticks_twice``, ``schedule_ticks_missed``);
- a queue never has more runs in flight than its concurrency, nor admits
  more than its rate (``queue_limit_exceeded``): a run's journal entries
  under one claim epoch were all written while that generation held its slot
  (a slot is the generation's, from admission to its end), so the span from
  its first to its last entry lies inside the slot's tenure, and no instant
  may fall inside more spans than the concurrency. Admissions are the runs'
  first ``acquire`` ``ClaimEvent`` (written in the admission's own batch);
  no window shorter than the rate's (by ``RATE_SLACK_MS``, the gap between
  the admission's clock reading and its claim's) may hold more than R. The
  activity queue's journaled attempts (``chaos_limited`` returns the interval
  it ran in, and a journaled attempt held its slot throughout) may not
  overlap more than its concurrency either;
- each update id is applied once (``update_applied_twice``: from the ids the
  workflow's own result lists and its ``update-done`` journal entries;
  ``update_lost``: an id sent but never applied);
- published values are never lost or reordered
  (``events_lost_or_reordered``): each talk's stream holds offsets 0..N-1
  with the n-th value ``{"n": n}`` at increasing journal positions, then its
  close, and its last event is ``done``; a cancel's ``armed`` event is there;
- a cancel's cleanup runs exactly once: an atomic step, so its ``StockMove``
  row is there once (``cleanup_twice`` / ``cleanup_missing``);
- ``deadlocks``: 'deadlock detected' errors in the engine logs (each
  traceback counted once: Django's ``OperationalError`` line repeats the
  driver's), which issue #21 demands be 0.

The flow-control and poison audits (``fair_starved``,
``debounce_violations``, ``poison_uncontained``, ``engines_down``, and the
children's and fair queue's concurrency in ``queue_limit_exceeded``) are in
``devtools.chaos.check_flow``, built on ``journal_spans`` and
``concurrency_sweep`` here; every one of these lists is a violation
(``check.CAPABILITY_VIOLATIONS``).
"""

from __future__ import annotations

import itertools
import re
from collections import Counter, defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from devtools.chaos import workflows as chaos
from project.demo.models import StockMove
from weft_django.engine.replay.updates import DONE_EVENT
from weft_django.kernel.schedule_spec import driver_workflow_id
from weft_django.models import ClaimEvent, JournalEntry, StreamEntry, WorkflowEvent, WorkflowRun

if TYPE_CHECKING:
    from devtools.chaos.check import Actions, Audit, ScheduleWindow
    from devtools.chaos.injector import FaultRecord

#: The admission's clock reading (its slot's ``admitted_at``) comes a few ms
#: before its claim's ``ClaimEvent.at_ms``: windows this much shorter than the
#: rate's are checked, so that gap never reads as a violation.
RATE_SLACK_MS = 250
#: A clock step lasts its fault's record; timestamps near it may still carry
#: the step (the largest step is 2.5 renew intervals of 1 s).
CLOCK_STEP_MARGIN_MS = 3_000
#: After the schedule is deleted, ticks this close to the deletion may not have
#: fired (the driver's engine just faulted, its taker not yet caught up).
SCHEDULE_TAIL_SLACK_MS = 10_000
#: The workflow id of a run ``client.trigger_schedule`` started (no tick's key).
TRIGGERED = re.compile(r"-t[0-9a-f]{6}$")
#: What one fault that disabled the schedule driver's holder (a kill, a pause, a
#: partition, a crash of an engine whose claims included the driver's) may cost
#: the tail: the driver's takeover (TTL + grace + a scan, with slack) and its
#: interrupted step's retry (``weft.schedule.step`` backs off up to 10 s).
DRIVER_DISRUPTION_MS = 15_000
DEADLOCK = "deadlock detected"
DEADLOCK_WRAPPER = "OperationalError: deadlock detected"


def _outage_ms(faults: Iterable[FaultRecord], start_ms: int, end_ms: int) -> int:
    """How long PostgreSQL was down (``pg_restart``) between ``start_ms`` and
    ``end_ms``: no tick can fire while it is, and the ones due then fire
    after it is back (the schedule's catch-up) -- unless the schedule is
    deleted first."""
    down = 0
    for fault in faults:
        if fault.kind == "pg_restart":
            down += max(0, min(fault.end_ms, end_ms) - max(fault.start_ms, start_ms))
    return down


def check_schedule(
    result: Audit,
    window: ScheduleWindow | None,
    runs: list[WorkflowRun],
    faults: Iterable[FaultRecord] = (),
) -> None:
    if window is None:
        result.schedule_ticks_missed.append("no schedule was created")
        return
    prefix = f"weft.schedule:{window.schedule_id}:"
    ticks: Counter[int] = Counter()
    for run in runs:
        if not run.workflow_id.startswith(f"{window.schedule_id}@"):
            continue
        key = run.idempotency_key or ""
        if not key and TRIGGERED.search(run.workflow_id):
            result.schedule_triggers += 1  # ``client.trigger_schedule``: outside the ticks
            continue
        if not key.startswith(prefix):
            result.schedule_ticks_twice.append(f"{run.workflow_id}: not a tick's key ({key!r})")
            continue
        ticks[int(key[len(prefix) :])] += 1
    result.schedule_ticks = sum(ticks.values())
    for tick, n in sorted(ticks.items()):
        if n > 1:
            result.schedule_ticks_twice.append(f"tick {tick}: {n} runs")
        if tick % window.every_ms:
            result.schedule_ticks_twice.append(f"tick {tick}: not on the {window.every_ms} ms grid")
    fired = sorted(ticks)
    if not fired:
        result.schedule_ticks_missed.append("no tick fired")
        return
    if fired[0] - window.since_ms > window.every_ms:
        result.schedule_ticks_missed.append(
            f"first tick {fired[0]} more than {window.every_ms} ms after creation {window.since_ms}"
        )
    for before, after in itertools.pairwise(fired):
        if after - before > window.every_ms:
            missing = (after - before) // window.every_ms - 1
            result.schedule_ticks_missed.append(f"{missing} ticks missing after {before}")
    end = window.deleted_ms
    if end is not None:
        if fired[-1] > end:
            result.schedule_ticks_twice.append(f"tick {fired[-1]} after deletion at {end}")
        slack = SCHEDULE_TAIL_SLACK_MS + _outage_ms(faults, fired[-1], end)
        slack += DRIVER_DISRUPTION_MS * _driver_disruptions(faults, window, fired[-1], end)
        if end - fired[-1] > slack:
            result.schedule_ticks_missed.append(
                f"last tick {fired[-1]}, schedule deleted at {end}: the tail never fired"
            )


def _driver_disruptions(
    faults: Iterable[FaultRecord], window: ScheduleWindow, start_ms: int, end_ms: int
) -> int:
    """Faults between ``start_ms`` and ``end_ms`` that disabled the engine
    holding the schedule's driver (its claim among those the fault's record
    says the engine held): each delays the ticks until the driver is taken
    over and its step retried; the ticks due meanwhile are caught up after
    that -- unless the schedule is deleted first (a poison run killing one
    driver holder after another does exactly this)."""
    from devtools.chaos.injector import DISABLING

    driver = driver_workflow_id(window.schedule_id)
    return sum(
        1
        for fault in faults
        if fault.kind in DISABLING and driver in fault.held and start_ms <= fault.start_ms <= end_ms
    )


def stepped_windows(faults: Iterable[FaultRecord]) -> dict[str, list[tuple[int, int]]]:
    """engine id -> the wall-clock windows (widened by the largest step) in
    which its injected clock was stepped (``clock_step`` faults)."""
    windows: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for fault in faults:
        if fault.kind == "clock_step":
            windows[fault.engine_id].append(
                (fault.start_ms - CLOCK_STEP_MARGIN_MS, fault.end_ms + CLOCK_STEP_MARGIN_MS)
            )
    return windows


def _stepped(windows: dict[str, list[tuple[int, int]]], engine_id: str, at_ms: int) -> bool:
    return any(start <= at_ms <= end for start, end in windows.get(engine_id, ()))


def check_queue(
    result: Audit,
    queued: Iterable[str],
    runs: list[WorkflowRun],
    events: dict[str, list[ClaimEvent]],
    faults: Iterable[FaultRecord] = (),
) -> None:
    """Concurrency and rate from the engines' timestamps. A timestamp an
    engine wrote while its clock was stepped is off by up to the step, so
    the spans and admissions it stamps then are no evidence either way; they
    are left out (counted in ``queue_evidence_skipped``). The limits hold in
    each engine's own clock (a rate window is measured on the admitting
    engine's clock, as ``docs/howto/queues.md`` says)."""
    wanted = set(queued)
    windows = stepped_windows(faults)
    run_ids = {run.pk: run.workflow_id for run in runs if run.workflow_id in wanted}
    result.queue_runs = len(run_ids)
    spans, skewed = journal_spans(run_ids, windows)
    result.queue_evidence_skipped += skewed
    result.queue_peak, exceeded = concurrency_sweep(spans, chaos.QUEUE_CONCURRENCY)
    for at, now in exceeded:
        result.queue_limit_exceeded.append(
            f"{len(now)} runs of {chaos.QUEUE} in flight at {at} "
            f"(concurrency {chaos.QUEUE_CONCURRENCY}): {now}"
        )
    firsts = [
        next(e for e in events.get(w, []) if e.kind == "acquire")
        for w in wanted
        if any(e.kind == "acquire" for e in events.get(w, []))
    ]
    unskewed = [e for e in firsts if not _stepped(windows, e.engine_id, e.at_ms)]
    result.queue_evidence_skipped += len(firsts) - len(unskewed)
    admitted = sorted((e.at_ms, e.workflow_id) for e in unskewed)
    limit, window_ms = chaos.QUEUE_RATE
    for i, (at, _) in enumerate(admitted):
        inside_window = [w for t, w in admitted[i:] if t - at < window_ms - RATE_SLACK_MS]
        result.rate_peak = max(result.rate_peak, len(inside_window))
        if len(inside_window) > limit:
            result.queue_limit_exceeded.append(
                f"{len(inside_window)} admissions of {chaos.QUEUE} within "
                f"{window_ms - RATE_SLACK_MS} ms from {at} (rate {limit}/{window_ms} ms): "
                f"{inside_window}"
            )


def journal_spans(
    run_ids: dict[Any, str], windows: dict[str, list[tuple[int, int]]]
) -> tuple[dict[tuple[str, int], list[int]], int]:
    """(workflow id, epoch) -> [first, last] ``at_ms`` of the journal entries of
    ``run_ids`` (run pk -> workflow id) written under that claim generation;
    and how many generations were left out because an engine stamped one of
    their entries while its clock was stepped (no evidence either way)."""
    spans: dict[tuple[str, int], list[int]] = {}
    skewed: set[tuple[str, int]] = set()
    for run_id, epoch, at, engine_id in JournalEntry.objects.filter(
        run_id__in=list(run_ids)
    ).values_list("run_id", "epoch", "at_ms", "engine_id"):
        key = (run_ids[run_id], epoch)
        if _stepped(windows, engine_id, at):
            skewed.add(key)
        span = spans.setdefault(key, [at, at])
        span[0], span[1] = min(span[0], at), max(span[1], at)
    for key in skewed:
        del spans[key]
    return spans, len(skewed)


def concurrency_sweep(
    spans: dict[tuple[str, int], list[int]], limit: int
) -> tuple[int, list[tuple[int, list[str]]]]:
    """The most workflows whose spans hold one instant, and each instant a span
    starts at while more than ``limit`` do (with them, sorted). Ends sort
    before starts at one instant: a slot freed then taken in one ms. A span
    of one instant (a generation that journaled once) is no evidence."""
    spans = {key: span for key, span in spans.items() if span[0] < span[1]}
    points = sorted(
        [(start, 1, wid) for (wid, _), (start, _) in spans.items()]
        + [(end, 0, wid) for (wid, _), (_, end) in spans.items()]
    )
    inside: Counter[str] = Counter()
    peak = 0
    exceeded: list[tuple[int, list[str]]] = []
    for at, starts, workflow_id in points:
        inside[workflow_id] += 1 if starts else -1
        now = sorted(w for w, n in inside.items() if n > 0)
        peak = max(peak, len(now))
        if starts and len(now) > limit:
            exceeded.append((at, now))
    return peak, exceeded


def check_activity_queue(result: Audit, runs: list[WorkflowRun]) -> None:
    target = f"{chaos.chaos_limited.__module__}.{chaos.chaos_limited.__name__}"
    spans = [
        (int(value["start"]), int(value["end"]), str(value["key"]))
        for value in JournalEntry.objects.filter(
            run_id__in=[run.pk for run in runs], kind="activity", error__isnull=True, target=target
        ).values_list("result", flat=True)
        if isinstance(value, dict)
    ]
    result.activity_queue_steps = len(spans)
    points = sorted([(s, 1, k) for s, _, k in spans] + [(e, 0, k) for _, e, k in spans])
    inside: set[str] = set()
    for at, starts, key in points:
        if starts:
            inside.add(key)
        else:
            inside.discard(key)
        result.activity_queue_peak = max(result.activity_queue_peak, len(inside))
        if starts and len(inside) > chaos.ACTIVITY_QUEUE_CONCURRENCY:
            result.queue_limit_exceeded.append(
                f"{len(inside)} attempts of {chaos.ACTIVITY_QUEUE} in flight at {at} "
                f"(concurrency {chaos.ACTIVITY_QUEUE_CONCURRENCY}): {sorted(inside)}"
            )


def check_updates(result: Audit, talks: Iterable[str], finals: dict[str, WorkflowRun]) -> None:
    for workflow_id in sorted(talks):
        run = finals.get(workflow_id)
        if run is None:
            continue  # counted lost already
        sent = chaos.update_ids(workflow_id)
        listed = (run.result or {}).get("applied", []) if isinstance(run.result, dict) else []
        applied = Counter(str(u) for u in listed)
        done = Counter(
            JournalEntry.objects.filter(run=run, kind=DONE_EVENT).values_list("target", flat=True)
        )
        result.updates_applied += len(set(applied) & set(sent))
        for update_id in sent:
            times = max(applied[update_id], done[update_id])
            if times > 1:
                result.update_applied_twice.append(
                    f"{workflow_id}: {update_id} in the result {applied[update_id]} times, "
                    f"{done[update_id]} update-done entries"
                )
            elif run.status == "completed" and applied[update_id] == 0:
                result.update_lost.append(f"{workflow_id}: {update_id} sent, never applied")


def check_published(
    result: Audit, talks: Iterable[str], cancels: Iterable[str], finals: dict[str, WorkflowRun]
) -> None:
    for workflow_id in sorted(talks):
        run = finals.get(workflow_id)
        if run is None or run.status != "completed":
            continue
        rows = list(StreamEntry.objects.filter(run=run, key=chaos.STREAM).order_by("offset"))
        result.stream_entries += sum(1 for row in rows if not row.closed)
        got = [(row.offset, row.closed, row.value) for row in rows]
        want: list[tuple[int, bool, Any]] = [
            (n, False, {"n": n}) for n in range(chaos.STREAM_ENTRIES)
        ]
        want.append((chaos.STREAM_ENTRIES, True, None))
        if got != want:
            result.events_lost_or_reordered.append(f"{workflow_id}: stream {got}")
        positions = [row.position for row in rows]
        if positions != sorted(set(positions)):
            result.events_lost_or_reordered.append(
                f"{workflow_id}: stream positions {positions} not increasing"
            )
        phase = _event(run, "phase")
        if phase != "done":
            result.events_lost_or_reordered.append(f"{workflow_id}: event phase {phase!r}")
    for workflow_id in sorted(cancels):
        run = finals.get(workflow_id)
        if run is not None and _event(run, "armed") is not True:
            result.events_lost_or_reordered.append(f"{workflow_id}: event armed missing")


def _event(run: WorkflowRun, key: str) -> Any:
    return WorkflowEvent.objects.filter(run=run, key=key).values_list("value", flat=True).first()


def check_cleanups(result: Audit, actions: Actions, keys: dict[str, tuple[str, str]]) -> None:
    result.cancels = len(actions.cancelled)
    applied = Counter(
        StockMove.objects.filter(kind=chaos.CLEANUP_KIND).values_list("workflow_id", flat=True)
    )
    for workflow_id in actions.cancelled:
        key = keys[workflow_id][1]
        if applied[key] == 0:
            result.cleanup_missing.append(f"{workflow_id}: cancelled, cleanup of {key} never ran")
        elif applied[key] > 1:
            result.cleanup_twice.append(f"{workflow_id}: cleanup of {key} ran {applied[key]} times")
    cancelled_keys = {keys[w][1] for w in actions.cancelled}
    for key, times in applied.items():
        if key not in cancelled_keys:
            result.cleanup_twice.append(f"{key}: cleaned up {times} times, never cancelled")


def count_deadlocks(result: Audit, logs: Path | None) -> None:
    if logs is None:
        return
    for path in sorted(logs.glob("*.log")):
        with path.open(errors="replace") as lines:
            for number, line in enumerate(lines, 1):
                if DEADLOCK in line and DEADLOCK_WRAPPER not in line:
                    result.deadlocks += 1
                    result.deadlock_lines.append(f"{path.name}:{number}: {line.strip()[:200]}")


def detached_children(keys: dict[str, tuple[str, str]]) -> dict[str, tuple[str, str]]:
    """The detached child each talk, cancel and kids starts, as ``(name, key)``."""
    children = {"chaos-talk": "chaos-leaf", "chaos-cancel": "chaos-leaf", "chaos-kids": "chaos-kid"}
    return {
        chaos.detached_id(workflow_id): (children[name], key)
        for workflow_id, (name, key) in keys.items()
        if name in children
    }


def by_name(keys: dict[str, tuple[str, str]], name: str) -> list[str]:
    return [workflow_id for workflow_id, (n, _) in keys.items() if n == name]


def group_runs(runs: Iterable[WorkflowRun]) -> dict[str, list[WorkflowRun]]:
    grouped: dict[str, list[WorkflowRun]] = defaultdict(list)
    for run in runs:
        grouped[run.workflow_id].append(run)
    return grouped


__all__ = [
    "by_name",
    "check_activity_queue",
    "check_cleanups",
    "check_published",
    "check_queue",
    "check_schedule",
    "check_updates",
    "concurrency_sweep",
    "count_deadlocks",
    "detached_children",
    "group_runs",
    "journal_spans",
    "stepped_windows",
]
