"""The audits of flow control and poison containment in the chaos soak, from
durable records (the workloads are in ``devtools.chaos.flows``).

Each protects one promise of the product:

- queues bound what runs, whoever started the run: no instant lies inside
  more journal spans of a queue's runs than its concurrency, for the
  children ``ctx.start_child`` put on ``CHILD_QUEUE`` (attached and
  detached) and the schedule's runs (ticks and triggers) that share it, and
  for the fair queue (``queue_limit_exceeded``, the same evidence as
  ``check_capabilities.check_queue``: a generation's journal entries were
  all written while it held its slot);
- a fair queue starves no key (``fair_starved``): the admission order
  (``engine.queues.fair``) picks the key whose turn came longest ago, a key
  of weight w having its turn at its w-th most recent admission. A key with
  no admission yet (each small key of the soak) therefore waits behind at
  most w admissions of any other key of weight w: counted between the
  run's creation (+ ``FAIR_SLACK_MS``: an admission that read its
  candidates just before the run's commit) and its own admission, each the
  run's first ``acquire`` ``ClaimEvent``;
- a debounce burst gives one run with the last call's input
  (``debounce_violations``): every call of a burst returned the same run
  unless the product's own rule split it (a call ``period`` or more after
  the previous one: judged from the harness's instants around each call,
  widened by a clock step's margin when an engine's clock was stepped
  meanwhile); each run a call returned finished ``completed`` with the
  input of the last call that returned it; no other run of the key exists;
- a poison run is contained (``poison_uncontained``): an activity that kills
  its engine fails after ``retries + 1`` deaths and the workflow catches
  ``ActivityError`` ("the engine running it stopped"); a body that kills its
  engine leaves the run ``suspended`` with ``CrashLoopError`` after
  ``MAX_RECOVERY_ATTEMPTS`` deaths; and the fleet is whole at the end
  (``engines_down``: a slot whose engine was down once every run finished,
  set by the harness, which restarts the engines that die).
"""

from __future__ import annotations

import itertools
import json
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from devtools.chaos import check_capabilities as capabilities
from devtools.chaos import workflows as chaos
from devtools.chaos.flows import DEBOUNCED, POISON_RETRIES
from weft_django.engine.activities.started import INTERRUPTED
from weft_django.engine.operations.debounce import id_prefix
from weft_django.models import ClaimEvent, WorkflowRun

if TYPE_CHECKING:
    from devtools.chaos.check import Audit
    from devtools.chaos.injector import FaultRecord

#: An admission may have read its candidates this long before a run it
#: passed over was committed (the run's ``created_at`` is its insert's clock).
FAIR_SLACK_MS = 500


@dataclass(frozen=True)
class DebounceCall:
    """One ``client.debounce`` call of the harness: its burst's key, its input's
    number, the wall clock just before and after it, the run it returned."""

    key: str
    n: int
    before_ms: int
    after_ms: int
    workflow_id: str


@dataclass(frozen=True)
class DebouncePlan:
    period_ms: int
    max_wait_ms: int


def check_queue_limits(
    result: Audit, runs: list[WorkflowRun], faults: Iterable[FaultRecord] = ()
) -> None:
    """The concurrency of ``CHILD_QUEUE`` and ``FAIR_QUEUE`` over every run on them."""
    windows = capabilities.stepped_windows(faults)
    for queue, limit in (
        (chaos.CHILD_QUEUE, chaos.CHILD_QUEUE_CONCURRENCY),
        (chaos.FAIR_QUEUE, chaos.FAIR_QUEUE_CONCURRENCY),
    ):
        run_ids = {run.pk: run.workflow_id for run in runs if run.queue == queue}
        spans, skewed = capabilities.journal_spans(run_ids, windows)
        result.queue_evidence_skipped += skewed
        peak, exceeded = capabilities.concurrency_sweep(spans, limit)
        if queue == chaos.CHILD_QUEUE:
            result.child_queue_runs, result.child_queue_peak = len(run_ids), peak
        else:
            result.fair_queue_runs, result.fair_queue_peak = len(run_ids), peak
        for at, now in exceeded:
            result.queue_limit_exceeded.append(
                f"{len(now)} runs of {queue} in flight at {at} (concurrency {limit}): {now}"
            )


def _ms(value: datetime) -> int:
    return int(value.timestamp() * 1000)


def check_fairness(
    result: Audit,
    fair: dict[str, tuple[str, int]],
    runs: list[WorkflowRun],
    events: dict[str, list[ClaimEvent]],
    faults: Iterable[FaultRecord] = (),
    *,
    small: Iterable[str] = (),
) -> None:
    """``fair``: workflow id -> (fairness key, weight) of every run the harness
    started on the fair queue; ``small``: the keys with one run, admitted never
    before (the ones whose wait the rule bounds)."""
    windows = capabilities.stepped_windows(faults)
    created = {run.workflow_id: _ms(run.created_at) for run in runs if run.workflow_id in fair}
    admitted: dict[str, int] = {}
    for workflow_id in fair:
        first = next((e for e in events.get(workflow_id, []) if e.kind == "acquire"), None)
        if first is None:
            continue  # never admitted: counted lost by the outcomes
        if capabilities._stepped(windows, first.engine_id, first.at_ms):
            result.queue_evidence_skipped += 1
            continue
        admitted[workflow_id] = first.at_ms
    result.fair_admissions = len(admitted)
    by_key: dict[str, list[int]] = defaultdict(list)
    for workflow_id, at in admitted.items():
        by_key[fair[workflow_id][0]].append(at)
    small_keys = set(small)
    weights = dict(fair.values())
    for workflow_id, (key, _) in sorted(fair.items()):
        if key not in small_keys or workflow_id not in admitted or workflow_id not in created:
            continue
        since, until = created[workflow_id] + FAIR_SLACK_MS, admitted[workflow_id]
        for other, instants in sorted(by_key.items()):
            if other == key:
                continue
            ahead = sum(1 for at in instants if since < at < until)
            if ahead > weights[other]:
                result.fair_starved.append(
                    f"{workflow_id} (key {key}) waited from {created[workflow_id]} to {until} "
                    f"behind {ahead} admissions of key {other} (weight {weights[other]})"
                )


def _stepped_between(faults: Iterable[FaultRecord], start: int, end: int) -> bool:
    margin = capabilities.CLOCK_STEP_MARGIN_MS
    return any(
        f.kind == "clock_step" and f.start_ms - margin <= end and f.end_ms + margin >= start
        for f in faults
    )


def check_debounce(
    result: Audit,
    calls: list[DebounceCall],
    plan: DebouncePlan,
    runs: Iterable[WorkflowRun],
    faults: Iterable[FaultRecord] = (),
) -> None:
    """``calls``: in the order made; ``runs``: every run of ``DEBOUNCED``."""
    faults = list(faults)
    result.debounce_calls = len(calls)
    bursts: dict[str, list[DebounceCall]] = defaultdict(list)
    for call in calls:
        bursts[call.key].append(call)
    result.debounce_bursts = len(bursts)
    stored: dict[str, list[WorkflowRun]] = defaultdict(list)
    for run in runs:
        for key in bursts:
            if run.workflow_id.startswith(id_prefix(DEBOUNCED, key)):
                stored[key].append(run)
    for key, mine in sorted(bursts.items()):
        returned = list(dict.fromkeys(call.workflow_id for call in mine))
        result.debounce_runs += len(returned)
        for before, after in itertools.pairwise(mine):
            if before.workflow_id == after.workflow_id:
                continue
            gap = after.after_ms - before.before_ms
            waited = after.after_ms - mine[0].before_ms
            due = plan.period_ms
            if _stepped_between(faults, before.before_ms, after.after_ms):
                due -= capabilities.CLOCK_STEP_MARGIN_MS
            if gap >= due or waited >= plan.max_wait_ms:
                result.debounce_splits_explained += 1
                continue
            result.debounce_violations.append(
                f"burst {key}: call {after.n} started run {after.workflow_id}, not "
                f"{before.workflow_id} of call {before.n}, within {gap} ms < period "
                f"{plan.period_ms} ms"
            )
        rows = {run.workflow_id: run for run in stored.get(key, [])}
        for workflow_id in sorted(set(rows) - set(returned)):
            result.debounce_violations.append(f"burst {key}: run {workflow_id} no call returned")
        for workflow_id in returned:
            last = [call for call in mine if call.workflow_id == workflow_id][-1]
            found = rows.get(workflow_id)
            want = f"{key}:{last.n}"
            if found is None:
                result.debounce_violations.append(f"burst {key}: run {workflow_id} lost")
            elif found.status != "completed" or found.result != want:
                result.debounce_violations.append(
                    f"burst {key}: run {workflow_id} {found.status} with {found.result!r}, "
                    f"want {want!r} (the last call's input)"
                )


#: How long after a poison run announced its exit the supervisor may first see
#: the engine dead (it looks every ``supervisor.INTERVAL_S``, slower when busy).
SEEN_WITHIN_MS = 5_000


def poison_crashes(log: Path | None, seen: Iterable[FaultRecord] = ()) -> list[FaultRecord]:
    """Every engine death a poison run announced (a line of the poison log,
    ``flows.POISON_LOG``), as a ``crash`` fault of the engine label that ran
    it, at that instant: what explains a duplicate execution on that engine,
    a Celery pool process's death included (which the harness cannot see).
    When the supervisor saw that engine dead soon after (``seen``), the crash
    names its engine id: its sessions ended at the announced instant, a little
    before the supervisor noticed (a Celery pool process's death names none:
    the node's sessions live on)."""
    from devtools.chaos.injector import FaultRecord

    if log is None or not log.exists():
        return []
    noticed = sorted((f.start_ms, f.target, f.engine_id) for f in seen if f.kind == "crash")
    crashes = []
    for line in log.read_text().splitlines():
        if not line.strip():
            continue
        entry = json.loads(line)
        at, label = int(entry["at"]), str(entry["engine"])
        engine_id = next(
            (e for t, lab, e in noticed if lab == label and 0 <= t - at <= SEEN_WITHIN_MS), ""
        )
        crashes.append(
            FaultRecord("crash", label, engine_id, at, at, detail=f"poison {entry['workflow_id']}")
        )
    return crashes


def check_poison(
    result: Audit,
    poison: dict[str, str],
    finals: dict[str, WorkflowRun],
    *,
    max_recovery_attempts: int,
) -> None:
    """``poison``: workflow id -> its workflow's name (``flows.POISON_NAMES``)."""
    result.poison_runs = len(poison)
    for workflow_id, name in sorted(poison.items()):
        run = finals.get(workflow_id)
        if run is None:
            result.poison_uncontained.append(f"{workflow_id}: no final run")
            continue
        if name == "chaos-poison-act":
            got = run.result if isinstance(run.result, dict) else {}
            if (
                run.status != "completed"
                or got.get("attempts") != POISON_RETRIES + 1
                or INTERRUPTED not in str(got.get("caught"))
            ):
                result.poison_uncontained.append(
                    f"{workflow_id}: {run.status} {run.result!r} {run.error!r}, want ActivityError "
                    f"caught after {POISON_RETRIES + 1} interrupted attempts"
                )
            continue
        error: dict[str, Any] = run.error if isinstance(run.error, dict) else {}
        recoveries = run.recoveries if isinstance(run.recoveries, dict) else {}
        if (
            run.status != "suspended"
            or error.get("type") != "CrashLoopError"
            or recoveries.get("count") != max_recovery_attempts
        ):
            result.poison_uncontained.append(
                f"{workflow_id}: {run.status} {error.get('type')} recoveries {recoveries}, want "
                f"suspended with CrashLoopError after {max_recovery_attempts}"
            )


__all__ = [
    "DebounceCall",
    "DebouncePlan",
    "check_debounce",
    "check_fairness",
    "check_poison",
    "check_queue_limits",
    "poison_crashes",
]
