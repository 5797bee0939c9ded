"""The soak's flow-control and poison audits catch what they are for
(``devtools.chaos.check_flow``).

The soak asserts each figure is 0; these show each is not 0 by construction,
from records shaped like the real ones, and stays 0 on good ones: a queue's
runs overlapping past its concurrency (children and ticks on the children's
queue), a small fairness key admitted behind more of a busy key's
admissions than its weight, a debounce burst split within its period or
run with an older call's input, and a poison run left running or finished
the wrong way (plus the crash records its announcements become). The
queue audit reads its rows from the database; the others take unsaved rows.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from devtools.chaos import check_flow as flow
from devtools.chaos import workflows as chaos
from devtools.chaos.check import Audit
from devtools.chaos.check_capabilities import concurrency_sweep
from devtools.chaos.check_flow import DebounceCall, DebouncePlan
from devtools.chaos.flows import DEBOUNCED, POISON_LOG
from devtools.chaos.injector import FaultRecord
from weft_django.engine.activities.started import INTERRUPTED
from weft_django.engine.operations.debounce import id_prefix
from weft_django.models import ClaimEvent, JournalEntry, WorkflowRun

# -- queue concurrency ---------------------------------------------------------------------


def test_the_sweep_finds_more_spans_than_the_limit_and_lets_a_handover_pass() -> None:
    spans = {("a", 1): [0, 100], ("b", 1): [50, 150], ("c", 1): [150, 200]}
    assert concurrency_sweep(spans, 2) == (2, [])  # c starts the ms b ends: handed over
    spans[("d", 1)] = [60, 70]
    peak, exceeded = concurrency_sweep(spans, 2)
    assert peak == 3
    assert exceeded == [(60, ["a", "b", "d"])]


def _queued(workflow_id: str, queue: str, *spans: tuple[int, int, int]) -> WorkflowRun:
    """A run on ``queue`` with two journal entries per ``(epoch, first, last)``."""
    run = WorkflowRun.objects.create(
        workflow_id=workflow_id, name="chaos-kid", status="completed", queue=queue
    )
    position = 0
    for epoch, first, last in spans:
        for at in (first, last):
            JournalEntry.objects.create(
                run=run, position=position, kind="activity", epoch=epoch, at_ms=at, engine_id="e1"
            )
            position += 1
    return run


@pytest.mark.django_db
def test_children_and_ticks_past_the_childrens_queue_concurrency_are_found() -> None:
    runs = [
        _queued("chaos-0006:kid0", chaos.CHILD_QUEUE, (1, 1_000, 1_460)),
        _queued("chaos-0006-det", chaos.CHILD_QUEUE, (1, 1_100, 1_500)),
        _queued("chaos-tick@1000", chaos.CHILD_QUEUE, (2, 1_450, 1_800)),  # 1 and 2 in flight
        _queued("chaos-fair-0-b0", chaos.FAIR_QUEUE, (1, 2_000, 2_300)),
        _queued("chaos-fair-0-s0", chaos.FAIR_QUEUE, (1, 2_300, 2_600)),  # handed over
    ]
    audit = Audit()
    flow.check_queue_limits(audit, runs)
    assert (audit.child_queue_runs, audit.child_queue_peak) == (3, 3)
    assert (audit.fair_queue_runs, audit.fair_queue_peak) == (2, 1)
    assert audit.queue_limit_exceeded == [
        f"3 runs of {chaos.CHILD_QUEUE} in flight at 1450 (concurrency 2): "
        "['chaos-0006-det', 'chaos-0006:kid0', 'chaos-tick@1000']"
    ]


@pytest.mark.django_db
def test_a_taken_over_run_is_two_generations_and_a_stepped_clock_no_evidence() -> None:
    """Its spans are per claim epoch: the gap between them (the dead holder's
    slot freed, the new one readmitted) holds no slot; entries an engine
    stamped under a clock step are left out."""
    runs = [
        _queued("chaos-0006:kid0", chaos.CHILD_QUEUE, (1, 1_000, 1_100), (2, 3_000, 3_100)),
        _queued("chaos-0006:kid1", chaos.CHILD_QUEUE, (1, 1_500, 2_500)),
        _queued("chaos-0006:kid2", chaos.CHILD_QUEUE, (1, 1_600, 2_600)),
    ]
    audit = Audit()
    flow.check_queue_limits(audit, runs)
    assert audit.queue_limit_exceeded == [] and audit.child_queue_peak == 2
    runs.append(_queued("chaos-0013:kid0", chaos.CHILD_QUEUE, (1, 1_550, 1_700)))
    audit = Audit()
    flow.check_queue_limits(audit, runs)
    assert len(audit.queue_limit_exceeded) == 1
    # Its margin reaches back to 1600: every generation but kid0's first is skewed.
    stepped = FaultRecord("clock_step", "chaos-e1", "e1", start_ms=4_600, end_ms=5_000)
    audit = Audit()
    flow.check_queue_limits(audit, runs, [stepped])
    assert audit.queue_limit_exceeded == [] and audit.queue_evidence_skipped == 4


# -- fairness ------------------------------------------------------------------------------


def _created(workflow_id: str, ms: int) -> WorkflowRun:
    return WorkflowRun(
        workflow_id=workflow_id,
        name="chaos-fair",
        created_at=datetime.fromtimestamp(ms / 1000, UTC),
    )


def _admitted(workflow_id: str, at: int) -> list[ClaimEvent]:
    return [ClaimEvent(workflow_id=workflow_id, epoch=1, engine_id="e1", kind="acquire", at_ms=at)]


FAIR = {
    **{f"chaos-fair-0-b{n}": ("busy", 1) for n in range(4)},
    "chaos-fair-0-s0": ("s0", 1),
    "chaos-fair-0-s1": ("s1", 1),
}


def _fair_audit(order: list[str]) -> Audit:
    """Every run created at 10 000, admitted one a second in ``order`` from 11 000."""
    runs = [_created(w, 10_000) for w in FAIR]
    events = {w: _admitted(w, 11_000 + 1_000 * i) for i, w in enumerate(order)}
    audit = Audit()
    flow.check_fairness(audit, FAIR, runs, events, small=["s0", "s1"])
    return audit


def test_round_robin_admission_passes() -> None:
    busy = [f"chaos-fair-0-b{n}" for n in range(4)]
    audit = _fair_audit([busy[0], "chaos-fair-0-s0", "chaos-fair-0-s1", *busy[1:]])
    assert audit.fair_admissions == 6
    assert audit.fair_starved == []


def test_a_small_key_behind_the_busy_keys_backlog_is_starved() -> None:
    busy = [f"chaos-fair-0-b{n}" for n in range(4)]
    audit = _fair_audit([*busy[:3], "chaos-fair-0-s0", "chaos-fair-0-s1", busy[3]])
    assert audit.fair_starved == [
        "chaos-fair-0-s0 (key s0) waited from 10000 to 14000 behind 3 admissions of key busy "
        "(weight 1)",
        "chaos-fair-0-s1 (key s1) waited from 10000 to 15000 behind 3 admissions of key busy "
        "(weight 1)",
    ]


def test_a_busy_key_of_weight_two_may_go_twice_first() -> None:
    fair = {w: (("busy", 2) if k == "busy" else (k, w_)) for w, (k, w_) in FAIR.items()}
    busy = [f"chaos-fair-0-b{n}" for n in range(4)]
    order = [busy[0], busy[1], "chaos-fair-0-s0", "chaos-fair-0-s1", *busy[2:]]
    runs = [_created(w, 10_000) for w in fair]
    events = {w: _admitted(w, 11_000 + 1_000 * i) for i, w in enumerate(order)}
    audit = Audit()
    flow.check_fairness(audit, fair, runs, events, small=["s0", "s1"])
    assert audit.fair_starved == []
    order = [*busy[:3], "chaos-fair-0-s0", "chaos-fair-0-s1", busy[3]]
    events = {w: _admitted(w, 11_000 + 1_000 * i) for i, w in enumerate(order)}
    audit = Audit()
    flow.check_fairness(audit, fair, runs, events, small=["s0", "s1"])
    assert len(audit.fair_starved) == 2


def test_admissions_before_a_small_run_was_committed_do_not_count() -> None:
    """Busy admissions within ``FAIR_SLACK_MS`` of the small run's creation may
    have read their candidates before it was there."""
    busy = [f"chaos-fair-0-b{n}" for n in range(4)]
    runs = [_created(w, 10_000) for w in FAIR]
    events = {w: _admitted(w, 10_100 + 100 * i) for i, w in enumerate(busy[:3])}
    events["chaos-fair-0-s0"] = _admitted("chaos-fair-0-s0", 10_600)
    audit = Audit()
    flow.check_fairness(audit, FAIR, runs, events, small=["s0", "s1"])
    assert audit.fair_starved == []


# -- debounce ------------------------------------------------------------------------------

PLAN = DebouncePlan(period_ms=1_500, max_wait_ms=30_000)


def _burst(key: str, ids: list[str], at: int = 1_000, spacing: int = 200) -> list[DebounceCall]:
    return [
        DebounceCall(key, n, at + spacing * n, at + spacing * n + 20, workflow_id)
        for n, workflow_id in enumerate(ids)
    ]


def _debounced(key: str, first: int, n: int, status: str = "completed") -> WorkflowRun:
    return WorkflowRun(
        workflow_id=f"{id_prefix(DEBOUNCED, key)}{first}",
        name=DEBOUNCED,
        status=status,
        result=f"{key}:{n}",
    )


def test_one_run_per_burst_with_the_last_input_passes() -> None:
    run = _debounced("db0", 1_000, 3)
    audit = Audit()
    flow.check_debounce(audit, _burst("db0", [run.workflow_id] * 4), PLAN, [run])
    assert (audit.debounce_calls, audit.debounce_bursts, audit.debounce_runs) == (4, 1, 1)
    assert audit.debounce_violations == []


def test_a_burst_split_within_its_period_and_a_stale_input_are_found() -> None:
    first, second = _debounced("db0", 1_000, 1), _debounced("db0", 1_400, 2)  # want n=3
    calls = _burst("db0", [first.workflow_id] * 2 + [second.workflow_id] * 2)
    audit = Audit()
    flow.check_debounce(audit, calls, PLAN, [first, second])
    assert audit.debounce_violations == [
        f"burst db0: call 2 started run {second.workflow_id}, not {first.workflow_id} of call 1, "
        "within 220 ms < period 1500 ms",
        f"burst db0: run {second.workflow_id} completed with 'db0:2', want 'db0:3' "
        "(the last call's input)",
    ]


def test_a_split_the_rule_explains_passes_and_an_extra_run_is_found() -> None:
    """A call ``period`` after the previous one (the harness stalled) starts
    the next burst; a run no call returned is an extra run."""
    first, second = _debounced("db0", 1_000, 0), _debounced("db0", 5_000, 1)
    calls = _burst("db0", [first.workflow_id, second.workflow_id], spacing=4_000)
    audit = Audit()
    flow.check_debounce(audit, calls, PLAN, [first, second])
    assert audit.debounce_violations == [] and audit.debounce_splits_explained == 1
    stray = _debounced("db0", 9_000, 1)
    audit = Audit()
    flow.check_debounce(audit, calls, PLAN, [first, second, stray])
    assert audit.debounce_violations == [f"burst db0: run {stray.workflow_id} no call returned"]


def test_a_stepped_engine_clock_explains_an_early_split() -> None:
    first, second = _debounced("db0", 1_000, 0), _debounced("db0", 2_000, 1)
    calls = _burst("db0", [first.workflow_id, second.workflow_id], spacing=1_000)
    audit = Audit()
    flow.check_debounce(audit, calls, PLAN, [first, second])
    assert len(audit.debounce_violations) == 1
    step = FaultRecord("clock_step", "chaos-e1", "e1", start_ms=0, end_ms=900)
    audit = Audit()
    flow.check_debounce(audit, calls, PLAN, [first, second], [step])
    assert audit.debounce_violations == []


# -- poison --------------------------------------------------------------------------------


def _poisoned(name: str, status: str, **fields: object) -> WorkflowRun:
    return WorkflowRun(workflow_id=f"{name}-0", name=name, status=status, **fields)


def test_contained_poison_passes() -> None:
    act = _poisoned(
        "chaos-poison-act",
        "completed",
        result={"caught": f"AttemptInterrupted: {INTERRUPTED} (e2)", "attempts": 3},
    )
    body = _poisoned(
        "chaos-poison-body",
        "suspended",
        error={"type": "CrashLoopError", "message": "..."},
        recoveries={"count": 5, "engines": ["e1", "e2"], "position": 0},
    )
    audit = Audit()
    flow.check_poison(
        audit,
        {act.workflow_id: act.name, body.workflow_id: body.name},
        {act.workflow_id: act, body.workflow_id: body},
        max_recovery_attempts=5,
    )
    assert audit.poison_runs == 2 and audit.poison_uncontained == []


def test_uncontained_poison_is_found() -> None:
    act = _poisoned("chaos-poison-act", "completed", result={"caught": None})
    body = _poisoned("chaos-poison-body", "running", recoveries={"count": 2})
    audit = Audit()
    flow.check_poison(
        audit,
        {act.workflow_id: act.name, body.workflow_id: body.name, "chaos-poison-act-1": act.name},
        {act.workflow_id: act, body.workflow_id: body},
        max_recovery_attempts=5,
    )
    assert audit.poison_uncontained == [
        "chaos-poison-act-0: completed {'caught': None} None, want ActivityError caught after "
        "3 interrupted attempts",
        "chaos-poison-act-1: no final run",
        "chaos-poison-body-0: running None recoveries {'count': 2}, want suspended with "
        "CrashLoopError after 5",
    ]


def test_each_announced_poison_exit_is_a_crash_of_its_engine(tmp_path: Path) -> None:
    log = tmp_path / POISON_LOG
    assert flow.poison_crashes(log) == [] and flow.poison_crashes(None) == []
    log.write_text(
        '{"workflow_id": "chaos-poison-body-0", "engine": "chaos-c3", "at": 1000}\n'
        '{"workflow_id": "chaos-poison-act-0", "engine": "chaos-e1", "at": 2000}\n'
    )
    # The supervisor saw chaos-e1.2 dead 300 ms after the announcement (and an
    # older boot of that slot long before): the crash names the engine that died.
    seen = [
        FaultRecord("crash", "chaos-e1", "chaos-e1.1", start_ms=500, end_ms=900),
        FaultRecord("crash", "chaos-e1", "chaos-e1.2", start_ms=2_300, end_ms=3_000),
    ]
    crashes = flow.poison_crashes(log, seen)
    assert [(c.kind, c.target, c.engine_id, c.start_ms, c.end_ms, c.detail) for c in crashes] == [
        ("crash", "chaos-c3", "", 1000, 1000, "poison chaos-poison-body-0"),
        ("crash", "chaos-e1", "chaos-e1.2", 2000, 2000, "poison chaos-poison-act-0"),
    ]
