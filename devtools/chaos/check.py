"""The post-run audit of a chaos soak, with ``ClaimEvent`` as the independent
record of who held which epoch when.

Why from durable records only: the engines were killed, paused and cut off;
their logs and counters are incomplete by design. What they committed is not:
every journal entry carries the ``(engine_id, epoch)`` it was written under,
every claim transition is a ``ClaimEvent`` written in the same batch, and each
activity execution left a ``SideEffect`` row naming the engine that ran it.

Figures (the invariant each protects):
- ``lost``: a workflow not ``completed`` with the result its input and the
  harness's signals determine (every workflow terminal; nothing dropped);
- ``terminal_twice``: more owner releases (the terminal commit's folded
  release) for a workflow id than it had runs;
- ``double_written``: a journal position present twice, a gap in a run's
  positions, or one leaf command settled at two positions;
- ``non_holder``: a journal entry whose ``(engine_id, epoch)`` is not the
  grant (``acquire``/``takeover``) ``ClaimEvent`` says that engine got, an
  epoch going backwards along a journal or across a workflow's events, or a
  takeover before the old holder's expiry + grace (``early_takeovers``) that
  its session's end does not explain: a kill or a backend termination of
  that engine before the takeover, or its record marked stopped by then
  (``SESSION_PRESENCE``: counted as ``session_takeovers``; a paused or
  cut-off engine keeps its session, so it must reach expiry);
- ``duplicates``: a recorded step executed more than once — *explained* when
  a kill, pause, partition or backend termination hit the engine of either
  execution between them (or up to ``STALE_AFTER_FAULT_MS`` before the later
  one: a resumed engine runs what it had begun before it learns it was
  deposed); anything else is reported as unexplained;
- ``stuck``: a claim held by an engine when it was killed, paused or cut off
  that no newer epoch replaced within TTL + grace + one scan (+ tolerance,
  + one takeover batch per claim the engine held), or any claim still held
  once every workflow finished. A claim not taken over before a paused or
  cut-off holder came back (renewed or released by it) is counted as
  ``kept_by_returning_holder``, not stuck;
- ``atomic_double_applied``: an atomic step (``chaos_atomic``) whose row is
  there more than once -- never explained by a fault: its row commits with
  its journal entry or not at all. ``atomic_lost``: a recorded atomic step
  without its row; ``atomic_unrecorded``: a row whose step the journal does
  not record (an effect that escaped its transaction);
- ``max_takeover_ms``: the longest time from such a fault to the new epoch.

The newer capabilities' audits (schedule ticks, queue limits, updates,
events and streams, cancel cleanups, deadlocks in the engine logs) are in
``devtools.chaos.check_capabilities``, those of flow control (queued
children and schedule runs, a fair queue, debounce) and poison containment
in ``devtools.chaos.check_flow``; their figures are here, in the one
summary line. Engine deaths a poison run caused (``crash``: seen and
restarted by ``harness.Supervisor``, or announced in the poison log) count
as faults wherever a fault explains something. ``lost`` covers their
outcomes too: a cancelled workflow must end ``cancelled``, a detached child
and each schedule tick's run ``completed`` with the result its id determines.
"""

from __future__ import annotations

import itertools
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.db.models import Q

from devtools.chaos import check_capabilities as capabilities
from devtools.chaos import check_flow as flow
from devtools.chaos.check_flow import DebounceCall, DebouncePlan
from devtools.chaos.flows import DEBOUNCED, POISON_LOG, POISON_NAMES
from devtools.chaos.injector import (
    DISABLING,
    DISRUPTIVE,
    EVERY_ENGINE,
    FAULT_KINDS,
    KILLING,
    SESSION_ENDING,
    FaultRecord,
)
from devtools.chaos.workflows import (
    ATOMIC_KIND,
    SCHEDULE_ID,
    STEP_KIND,
    chaos_atomic,
    chaos_step,
    expected_result,
    expected_talk,
)
from project.demo.models import SideEffect, StockMove
from weft_django.conf import get_settings
from weft_django.engine.workflow.commands import LEAF_KINDS
from weft_django.kernel.schedule_spec import driver_workflow_id
from weft_django.models import ClaimEvent, EngineRecord, JournalEntry, WorkflowClaim, WorkflowRun
from weft_django.ownership import WORKFLOW_CLAIM_TAKEOVER_GRACE_MULTIPLIER

GRANTING = ("acquire", "takeover")
#: What one takeover batch of the reclaim scan may cost on two busy cores.
SCAN_MS_PER_CLAIM = 25
#: A stalled engine acts on stale beliefs until it learns it was deposed (its next
#: renewal or fenced write): an activity it runs this long after its fault is the
#: fault's doing.
STALE_AFTER_FAULT_MS = 3_000


@dataclass
class ScheduleWindow:
    """When the harness's schedule was active: from ``since_ms`` (its row's,
    engine clock) until ``deleted_ms``."""

    schedule_id: str
    every_ms: int
    since_ms: int
    deleted_ms: int | None = None


@dataclass
class Actions:
    """What the harness did besides starting workflows (``harness.Driver``)."""

    cancelled: list[str] = field(default_factory=list)
    updates_sent: int = 0
    updates_resent: int = 0
    schedule: ScheduleWindow | None = None
    #: Runs started on the fair queue: workflow id -> (fairness key, weight) ...
    fair: dict[str, tuple[str, int]] = field(default_factory=dict)
    #: ... and the keys of them with one run each (never admitted before).
    fair_small: list[str] = field(default_factory=list)
    debounce: list[DebounceCall] = field(default_factory=list)
    debounce_plan: DebouncePlan | None = None
    #: Poison runs: workflow id -> workflow name.
    poison: dict[str, str] = field(default_factory=dict)
    #: Engine deaths the harness saw and answered with a fresh engine.
    crashes: list[FaultRecord] = field(default_factory=list)
    #: Slots whose engine was down once every run had finished.
    engines_down: list[str] = field(default_factory=list)


#: The capability figures that are broken promises (each a list of offenders).
CAPABILITY_VIOLATIONS = (
    "schedule_ticks_twice",
    "schedule_ticks_missed",
    "queue_limit_exceeded",
    "update_applied_twice",
    "update_lost",
    "events_lost_or_reordered",
    "cleanup_twice",
    "cleanup_missing",
    "fair_starved",
    "debounce_violations",
    "poison_uncontained",
    "engines_down",
)


@dataclass
class Audit:
    workflows: int = 0
    runs: int = 0
    faults: Counter[str] = field(default_factory=Counter)
    lost: list[str] = field(default_factory=list)
    terminal_twice: list[str] = field(default_factory=list)
    double_written: list[str] = field(default_factory=list)
    non_holder: list[str] = field(default_factory=list)
    early_takeovers: list[str] = field(default_factory=list)
    #: Takeovers before expiry that the old holder's ended session explains.
    session_takeovers: int = 0
    duplicates_explained: list[str] = field(default_factory=list)
    duplicates_unexplained: list[str] = field(default_factory=list)
    unrecorded_executions: int = 0
    atomic_steps: int = 0
    atomic_double_applied: list[str] = field(default_factory=list)
    atomic_lost: list[str] = field(default_factory=list)
    atomic_unrecorded: list[str] = field(default_factory=list)
    stuck: list[str] = field(default_factory=list)
    takeover_ms: list[int] = field(default_factory=list)
    takeovers: int = 0
    kept_by_returning_holder: int = 0
    journal_entries: int = 0
    # -- the newer capabilities (``check_capabilities``) -------------------------------
    detached: int = 0
    schedule_ticks: int = 0
    schedule_ticks_twice: list[str] = field(default_factory=list)
    schedule_ticks_missed: list[str] = field(default_factory=list)
    queue_runs: int = 0
    queue_peak: int = 0
    rate_peak: int = 0
    activity_queue_steps: int = 0
    activity_queue_peak: int = 0
    queue_limit_exceeded: list[str] = field(default_factory=list)
    updates_sent: int = 0
    updates_resent: int = 0
    updates_applied: int = 0
    update_applied_twice: list[str] = field(default_factory=list)
    update_lost: list[str] = field(default_factory=list)
    stream_entries: int = 0
    events_lost_or_reordered: list[str] = field(default_factory=list)
    cancels: int = 0
    cleanup_twice: list[str] = field(default_factory=list)
    cleanup_missing: list[str] = field(default_factory=list)
    deadlocks: int = 0
    deadlock_lines: list[str] = field(default_factory=list)
    #: Queue spans and admissions stamped by an engine under a clock step: no
    #: evidence either way (``check_capabilities.check_queue``).
    queue_evidence_skipped: int = 0
    # -- flow control and poison containment (``check_flow``) --------------------------
    schedule_triggers: int = 0
    child_queue_runs: int = 0
    child_queue_peak: int = 0
    fair_queue_runs: int = 0
    fair_queue_peak: int = 0
    fair_admissions: int = 0
    fair_starved: list[str] = field(default_factory=list)
    debounce_calls: int = 0
    debounce_bursts: int = 0
    debounce_runs: int = 0
    debounce_splits_explained: int = 0
    debounce_violations: list[str] = field(default_factory=list)
    poison_runs: int = 0
    poison_uncontained: list[str] = field(default_factory=list)
    engine_crashes: int = 0
    engines_revived: int = 0
    engines_down: list[str] = field(default_factory=list)
    #: ``pg_stat_database.deadlocks`` of the soak's database over the run: every
    #: deadlock PostgreSQL detected, logged by an engine or not (set by the harness).
    pg_deadlocks: int = 0

    @property
    def violations(self) -> int:
        """Broken promises: any of these fails the soak."""
        return (
            len(self.lost)
            + len(self.terminal_twice)
            + len(self.double_written)
            + len(self.non_holder)
            + len(self.early_takeovers)
            + len(self.duplicates_unexplained)
            + len(self.stuck)
            + len(self.atomic_double_applied)
            + len(self.atomic_lost)
            + len(self.atomic_unrecorded)
            + sum(len(getattr(self, name)) for name in CAPABILITY_VIOLATIONS)
            + self.deadlocks
            + self.pg_deadlocks
        )

    def summary_line(
        self, *, engines: int, celery: int, boots: int, seed: int, duration_s: float
    ) -> str:
        kinds = " ".join(f"{k}:{self.faults.get(k, 0)}" for k in FAULT_KINDS)
        dup = len(self.duplicates_explained) + len(self.duplicates_unexplained)
        return (
            f"chaos seed={seed} engines={engines} ({engines - celery} standalone + "
            f"{celery} celery, {boots} boots) workflows={self.workflows} runs={self.runs} "
            f"journal={self.journal_entries} faults={sum(self.faults.values())} [{kinds}] "
            f"lost={len(self.lost)} terminal_twice={len(self.terminal_twice)} "
            f"double_written={len(self.double_written)} "
            f"non_holder_writes={len(self.non_holder)} "
            f"early_takeovers={len(self.early_takeovers)} "
            f"session_takeovers={self.session_takeovers} "
            f"dup_activity_execs={dup} (unexplained {len(self.duplicates_unexplained)}) "
            f"atomic_steps={self.atomic_steps} "
            f"atomic_double_applied={len(self.atomic_double_applied)} "
            f"atomic_lost={len(self.atomic_lost)} "
            f"atomic_unrecorded={len(self.atomic_unrecorded)} "
            f"stuck_claims={len(self.stuck)} takeovers={self.takeovers} "
            f"kept_by_returning_holder={self.kept_by_returning_holder} "
            f"max_takeover_ms={max(self.takeover_ms, default=0)} "
            f"detached={self.detached} "
            f"schedule_ticks={self.schedule_ticks} "
            f"schedule_ticks_twice={len(self.schedule_ticks_twice)} "
            f"schedule_ticks_missed={len(self.schedule_ticks_missed)} "
            f"queue_runs={self.queue_runs} queue_peak={self.queue_peak} "
            f"rate_peak={self.rate_peak} activity_queue_steps={self.activity_queue_steps} "
            f"activity_queue_peak={self.activity_queue_peak} "
            f"queue_limit_exceeded={len(self.queue_limit_exceeded)} "
            f"(skewed evidence skipped {self.queue_evidence_skipped}) "
            f"updates={self.updates_sent} (resent {self.updates_resent}, applied "
            f"{self.updates_applied}) update_applied_twice={len(self.update_applied_twice)} "
            f"update_lost={len(self.update_lost)} "
            f"stream_entries={self.stream_entries} "
            f"events_lost_or_reordered={len(self.events_lost_or_reordered)} "
            f"cancels={self.cancels} cleanup_twice={len(self.cleanup_twice)} "
            f"cleanup_missing={len(self.cleanup_missing)} "
            f"schedule_triggers={self.schedule_triggers} "
            f"child_queue_runs={self.child_queue_runs} child_queue_peak={self.child_queue_peak} "
            f"fair_queue_runs={self.fair_queue_runs} fair_queue_peak={self.fair_queue_peak} "
            f"fair_admissions={self.fair_admissions} fair_starved={len(self.fair_starved)} "
            f"debounce_calls={self.debounce_calls} bursts={self.debounce_bursts} "
            f"runs={self.debounce_runs} (split by rule {self.debounce_splits_explained}) "
            f"debounce_violations={len(self.debounce_violations)} "
            f"poison_runs={self.poison_runs} poison_uncontained={len(self.poison_uncontained)} "
            f"engine_crashes={self.engine_crashes} engines_revived={self.engines_revived} "
            f"engines_down={len(self.engines_down)} "
            f"deadlocks={self.deadlocks} pg_deadlocks={self.pg_deadlocks} "
            f"duration_s={duration_s:.0f}"
        )

    def details(self) -> str:
        """Every violation and duplicate, one per line (empty when clean)."""
        lines = []
        for name in (
            "lost",
            "terminal_twice",
            "double_written",
            "non_holder",
            "early_takeovers",
            "duplicates_unexplained",
            "stuck",
            "atomic_double_applied",
            "atomic_lost",
            "atomic_unrecorded",
            *CAPABILITY_VIOLATIONS,
            "deadlock_lines",
            "duplicates_explained",
        ):
            for item in getattr(self, name)[:50]:
                lines.append(f"{name}: {item}")
        return "\n".join(lines)


def audit(
    started: dict[str, tuple[str, str]],
    faults: list[FaultRecord],
    engines: dict[str, str],
    *,
    dead: Iterable[str],
    takeover_bound_ms: int,
    grace_ms: int = WORKFLOW_CLAIM_TAKEOVER_GRACE_MULTIPLIER * 1_000,
    actions: Actions | None = None,
    logs: Path | None = None,
) -> Audit:
    """Audit the runs of ``started`` (workflow id -> (name, key)), their children,
    the schedule's runs, and what the harness did to them (``actions``);
    ``logs``: the engines' log directory, searched for deadlocks."""
    actions = actions or Actions()
    result = Audit(workflows=len(started), faults=Counter(f.kind for f in faults))
    result.updates_sent, result.updates_resent = actions.updates_sent, actions.updates_resent
    runs = list(WorkflowRun.objects.filter(MINE))
    result.runs = len(runs)
    # An engine's death by a poison run is a fault the injector did not plan.
    poisoned = flow.poison_crashes(None if logs is None else logs / POISON_LOG, actions.crashes)
    result.engine_crashes = len(poisoned)
    result.engines_revived = len(actions.crashes)
    result.engines_down = list(actions.engines_down)
    faults = [*faults, *actions.crashes, *poisoned]
    events = _events()
    finals = _check_outcomes(result, started, runs, events, actions)
    _check_journal(result, runs, events, grace_ms, _session_ends(faults, engines))
    _check_activities(result, faults, runs)
    _check_atomic(result, runs)
    _check_claims(result, faults, events, set(dead), takeover_bound_ms)
    flow.check_queue_limits(result, runs, faults)
    flow.check_fairness(result, actions.fair, runs, events, faults, small=actions.fair_small)
    if actions.debounce_plan is not None:
        debounced = [run for run in runs if run.name == DEBOUNCED]
        flow.check_debounce(result, actions.debounce, actions.debounce_plan, debounced, faults)
    flow.check_poison(
        result, actions.poison, finals, max_recovery_attempts=get_settings().max_recovery_attempts
    )
    talks = capabilities.by_name(started, "chaos-talk")
    cancels = capabilities.by_name(started, "chaos-cancel")
    capabilities.check_schedule(result, actions.schedule, runs, faults)
    capabilities.check_queue(
        result, capabilities.by_name(started, "chaos-queued"), runs, events, faults
    )
    capabilities.check_activity_queue(result, runs)
    capabilities.check_updates(result, talks, finals)
    capabilities.check_published(result, talks, cancels, finals)
    capabilities.check_cleanups(result, actions, started)
    capabilities.count_deadlocks(result, logs)
    return result


#: The soak's workflows: its own ids and the debounce runs' (``debounce:<name>:...``).
MINE = Q(workflow_id__startswith="chaos-") | Q(workflow_id__startswith=f"debounce:{DEBOUNCED}:")


def _events() -> dict[str, list[ClaimEvent]]:
    """The claim events of the chaos workflows and of the schedule's driver (a
    workflow the engines own like any other: a fault may hit its holder)."""
    grouped: dict[str, list[ClaimEvent]] = defaultdict(list)
    mine = MINE | Q(workflow_id=driver_workflow_id(SCHEDULE_ID))
    for event in ClaimEvent.objects.filter(mine).order_by("id"):
        grouped[event.workflow_id].append(event)
    return grouped


TERMINAL_REASONS = frozenset({"completed", "failed", "cancelled", "timed_out"})


def _check_outcomes(
    result: Audit,
    started: dict[str, tuple[str, str]],
    runs: list[WorkflowRun],
    events: dict[str, list[ClaimEvent]],
    actions: Actions,
) -> dict[str, WorkflowRun]:
    """Each expected workflow's final run has the status and result its input and
    the harness's actions determine; returns workflow id -> final run."""
    by_id = capabilities.group_runs(runs)
    detached = capabilities.detached_children(started)
    result.detached = len(detached)
    fair = {workflow_id: ("chaos-fair", "") for workflow_id in actions.fair}
    poison = {workflow_id: (name, "") for workflow_id, name in actions.poison.items()}
    expected = {**started, **detached, **fair, **poison}
    ticks = [w for w in by_id if w.startswith(f"{SCHEDULE_ID}@")]
    cancelled = set(actions.cancelled)
    finals_of: dict[str, WorkflowRun] = {}
    for workflow_id in sorted([*expected, *ticks]):
        mine = by_id.get(workflow_id, [])
        continued = {run.continued_from_id for run in mine if run.continued_from_id}
        finals = [run for run in mine if run.pk not in continued]
        if len(finals) != 1:
            result.lost.append(f"{workflow_id}: {len(finals)} final runs of {len(mine)}")
            continue
        final = finals_of[workflow_id] = finals[0]
        name, key = expected.get(workflow_id, ("chaos-ticked", ""))
        if name == "chaos-cancel":
            if workflow_id not in cancelled:
                result.lost.append(f"{workflow_id}: never cancelled ({final.status})")
            elif final.status != "cancelled" or (final.error or {}).get("type") != "Cancelled":
                result.lost.append(f"{workflow_id}: {final.status} {final.error}, not cancelled")
            continue
        if name in POISON_NAMES:
            continue  # contained, not completed: ``check_flow.check_poison``
        if final.status != "completed":
            result.lost.append(f"{workflow_id}: {final.status} {final.error}")
            continue
        got: Any = final.result
        if name == "chaos-ticked":
            want: Any = f"{workflow_id}:tick"
        elif name == "chaos-fair":
            want = f"{workflow_id}:fair"
        elif name == "chaos-talk":
            want = expected_talk(workflow_id, key)
            if isinstance(got, dict) and isinstance(got.get("applied"), list):
                got = {**got, "applied": sorted(got["applied"])}
        else:
            want = expected_result(name, key)
        if got != want:
            result.lost.append(f"{workflow_id}: wrong result {final.result!r}")
    for workflow_id, mine in by_id.items():
        # Terminal commits fold a release whose reason is the terminal status;
        # other releases (shutdown, a stale reclaim handing a finished
        # workflow's claim straight back) are not terminal commits.
        releases = sum(
            1
            for e in events.get(workflow_id, [])
            if e.kind == "release" and e.reason in TERMINAL_REASONS
        )
        if releases > len(mine):
            result.terminal_twice.append(f"{workflow_id}: {releases} releases for {len(mine)} runs")
        live = [run.status for run in mine if not run.is_terminal]
        if live and workflow_id not in expected:
            result.lost.append(f"{workflow_id} (a child): left {live}")
    return finals_of


def _session_ends(faults: list[FaultRecord], engines: dict[str, str]) -> dict[str, int]:
    """Engine id -> the earliest time its database sessions ended: a kill or a
    backend termination (the harness's), a server restart (every engine's), or
    its record marked stopped."""
    ends: dict[str, int] = {}
    for fault in faults:
        if fault.kind in SESSION_ENDING:
            if not fault.engine_id:
                continue  # a poison crash of a Celery pool process: the node lives on
            hit = list(engines) if fault.engine_id == EVERY_ENGINE else [fault.engine_id]
            for engine_id in hit:
                ends[engine_id] = min(ends.get(engine_id, fault.start_ms), fault.start_ms)
    for engine_id, stopped_at in EngineRecord.objects.exclude(stopped_at=None).values_list(
        "engine_id", "stopped_at"
    ):
        ends[engine_id] = min(ends.get(engine_id, stopped_at), stopped_at)
    return ends


def _check_journal(
    result: Audit,
    runs: list[WorkflowRun],
    events: dict[str, list[ClaimEvent]],
    grace_ms: int,
    session_ends: dict[str, int],
) -> None:
    workflow_of = {run.pk: run.workflow_id for run in runs}
    entries: dict[Any, list[JournalEntry]] = defaultdict(list)
    for entry in JournalEntry.objects.filter(run_id__in=list(workflow_of)).order_by(
        "run_id", "position", "id"
    ):
        entries[entry.run_id].append(entry)
        result.journal_entries += 1
    for workflow_id, mine in events.items():
        granting = [e for e in mine if e.kind in GRANTING]
        granted: dict[int, str] = {}
        for event in granting:
            if event.epoch in granted:
                result.non_holder.append(f"{workflow_id}: epoch {event.epoch} granted twice")
            granted[event.epoch] = event.engine_id
        epochs = [e.epoch for e in mine if e.kind in (*GRANTING, "rotate", "force_release")]
        if epochs != sorted(set(epochs)):
            result.non_holder.append(f"{workflow_id}: epochs not increasing {epochs}")
        for event in mine:
            if event.kind == "takeover" and event.previous_expires_at is not None:
                result.takeovers += 1
                if event.at_ms <= event.previous_expires_at + grace_ms:
                    ended = session_ends.get(event.previous_engine_id or "")
                    if ended is not None and ended <= event.at_ms:
                        result.session_takeovers += 1
                        continue
                    result.early_takeovers.append(
                        f"{workflow_id}: epoch {event.epoch} at {event.at_ms} from "
                        f"{event.previous_engine_id} expiring {event.previous_expires_at}"
                    )
    for run_id, rows in entries.items():
        workflow_id = workflow_of[run_id]
        granted = {e.epoch: e.engine_id for e in events.get(workflow_id, []) if e.kind in GRANTING}
        positions = [e.position for e in rows]
        twice = [p for p, n in Counter(positions).items() if n > 1]
        if twice:
            result.double_written.append(f"{workflow_id} run {run_id}: positions {twice} twice")
        if sorted(set(positions)) != list(
            range(min(positions), min(positions) + len(set(positions)))
        ):
            result.double_written.append(f"{workflow_id} run {run_id}: gaps in {positions}")
        settled = Counter(e.command for e in rows if e.kind in LEAF_KINDS and e.command is not None)
        again = [c for c, n in settled.items() if n > 1]
        if again:
            result.double_written.append(
                f"{workflow_id} run {run_id}: commands {again} settled twice"
            )
        previous = 0
        for entry in rows:
            holder = granted.get(entry.epoch)
            if holder != entry.engine_id:
                result.non_holder.append(
                    f"{workflow_id} position {entry.position}: written by {entry.engine_id} "
                    f"at epoch {entry.epoch}, granted to {holder}"
                )
            if entry.epoch < previous:
                result.non_holder.append(
                    f"{workflow_id} position {entry.position}: epoch {entry.epoch} < {previous}"
                )
            previous = max(previous, entry.epoch)


def _check_activities(result: Audit, faults: list[FaultRecord], runs: list[WorkflowRun]) -> None:
    recorded = {
        str(value)
        for value in JournalEntry.objects.filter(
            run_id__in=[run.pk for run in runs],
            kind="activity",
            error__isnull=True,
            target=f"{chaos_step.__module__}.{chaos_step.__name__}",
        ).values_list("result", flat=True)
        if isinstance(value, str)
    }
    executions: dict[str, list[tuple[int, str]]] = defaultdict(list)
    for key, stamp in SideEffect.objects.filter(kind=STEP_KIND).values_list("key", "at"):
        step, _, label = key.rpartition("@")
        executions[step].append((int(stamp.timestamp() * 1000), label))
    result.unrecorded_executions = sum(1 for step in executions if step not in recorded)
    disruptive = [f for f in faults if f.kind in DISRUPTIVE]
    for step in sorted(recorded):
        ran = sorted(executions.get(step, []))
        if not ran:
            result.lost.append(f"step {step}: recorded but never executed")
        for (at, label), (next_at, next_label) in itertools.pairwise(ran):
            # A fault on either engine: the first one died or stalled after the side
            # effect, or the second was deposed while stalled and ran it on resuming.
            cause = next(
                (
                    f
                    for f in disruptive
                    if f.target in (label, next_label, EVERY_ENGINE)
                    and f.start_ms <= next_at
                    and (f.end_ms or next_at) + STALE_AFTER_FAULT_MS >= at
                ),
                None,
            )
            what = f"{step}: ran on {label} at {at}, again on {next_label} at {next_at}"
            if cause is None:
                result.duplicates_unexplained.append(what)
            else:
                result.duplicates_explained.append(f"{what} ({cause.kind} of {cause.target})")


def _check_atomic(result: Audit, runs: list[WorkflowRun]) -> None:
    """Each recorded atomic step applied exactly once; nothing applied unrecorded."""
    recorded = Counter(
        str(value)
        for value in JournalEntry.objects.filter(
            run_id__in=[run.pk for run in runs],
            kind="activity",
            error__isnull=True,
            target=f"{chaos_atomic.__module__}.{chaos_atomic.__name__}",
        ).values_list("result", flat=True)
    )
    applied = Counter(
        StockMove.objects.filter(kind=ATOMIC_KIND).values_list("workflow_id", flat=True)
    )
    result.atomic_steps = len(recorded)
    for step, times in sorted(applied.items()):
        if times > 1:
            result.atomic_double_applied.append(f"{step}: applied {times} times")
        if step not in recorded:
            result.atomic_unrecorded.append(f"{step}: applied {times} times, never recorded")
    for step, times in sorted(recorded.items()):
        if applied[step] == 0:
            result.atomic_lost.append(f"{step}: recorded {times} times, never applied")
        elif times > 1:
            result.atomic_double_applied.append(f"{step}: recorded {times} times")


def _check_claims(
    result: Audit,
    faults: list[FaultRecord],
    events: dict[str, list[ClaimEvent]],
    dead: set[str],
    bound_ms: int,
) -> None:
    for fault in faults:
        if fault.kind not in DISABLING:
            continue
        # One scan of N stale claims is N takeover batches, one after another.
        bound = bound_ms + SCAN_MS_PER_CLAIM * len(fault.held)
        for workflow_id, epoch in fault.held.items():
            mine = events.get(workflow_id, [])
            newer = [e for e in mine if e.epoch > epoch]
            if newer and newer[0].kind in ("takeover", "rotate") and fault.kind not in KILLING:
                expired = newer[0].previous_expires_at or 0
                if newer[0].previous_engine_id == fault.engine_id and expired > fault.end_ms:
                    # Not taken over while it was away: the holder came back and
                    # renewed it (a later fault, its own end, or a cancel's
                    # rotation replaced it).
                    result.kept_by_returning_holder += 1
                    continue
            if not newer and any(
                e.kind == "release" and e.epoch == epoch and e.engine_id == fault.engine_id
                for e in mine
            ):
                # Its holder kept it (came back) or its terminal commit was in flight
                # across the fault (that transaction, row lock included, stayed open).
                result.kept_by_returning_holder += 1
                continue
            if not newer:
                result.stuck.append(
                    f"{workflow_id}: epoch {epoch} of {fault.engine_id} ({fault.kind}) "
                    "never replaced"
                )
                continue
            if newer[0].kind == "acquire" and any(
                e.kind == "release" and e.epoch == epoch and e.engine_id == fault.engine_id
                for e in mine
            ):
                # Not taken over while it was away (its workflow had nothing to
                # drive): the holder came back, released it itself (its run ended
                # or continued as new) and the next run acquired it afresh.
                result.kept_by_returning_holder += 1
                continue
            latency = newer[0].at_ms - fault.start_ms
            result.takeover_ms.append(latency)
            if latency > bound:
                result.stuck.append(
                    f"{workflow_id}: epoch {epoch} of {fault.engine_id} ({fault.kind}) replaced "
                    f"after {latency} ms > {bound} ms by {newer[0].kind}"
                )
    for workflow_id, engine_id in (
        WorkflowClaim.objects.filter(MINE)
        .filter(engine_id__isnull=False)
        .values_list("workflow_id", "engine_id")
    ):
        state = "dead" if engine_id in dead else "live"
        result.stuck.append(f"{workflow_id}: still held by {state} engine {engine_id} at the end")
