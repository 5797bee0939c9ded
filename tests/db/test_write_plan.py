"""A checked batch's writes, grouped into few statements, write what they wrote one by one.

Invariants protected (``ownership.write_plan``, ``db.write_statements``):
- the same list of writes leaves the same rows whether it is applied write by
  write or grouped (multi-row inserts, one ``UPDATE`` for equal values, claim
  puts from ``VALUES``, distinct tables as one statement of CTEs);
- inserted rows get their database keys, in the order they were listed;
- writes on one table keep their order (two updates of one row, two puts of
  one claim, an insert / delete / insert of timers around a barrier);
- a failing grouped write fails the whole batch: nothing of it stays;
- a pickup-shaped batch of many runs is ONE write statement on PostgreSQL;
- where the store cannot (SQLite), each write is applied as before.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from django.db import DatabaseError, connection, transaction
from django.db.models import F
from django.forms.models import model_to_dict
from django.test.utils import CaptureQueriesContext

from weft_django import db as store
from weft_django.models import ClaimEvent, JournalEntry, Timer, WorkflowClaim, WorkflowRun
from weft_django.ownership.batch import conditional_batch
from weft_django.ownership.ops import (
    ClaimCondition,
    Delete,
    Insert,
    PutClaim,
    RunCondition,
    Update,
    Write,
)
from weft_django.ownership.write_plan import apply_writes

pytestmark = pytest.mark.usefixtures("batch_db")

AT = datetime(2026, 12, 4, 12, 0, 0, 123456, tzinfo=UTC)


class _OneByOne(store.StoreOps):
    """A store without coalesced writes: the reference path."""

    supports_coalesced_writes = False


def _world(tag: str, runs: int = 3) -> list[WorkflowRun]:
    out = []
    for i in range(runs):
        wid = f"{tag}-{i}"
        WorkflowClaim.objects.create(workflow_id=wid, epoch=1)
        out.append(
            WorkflowRun.objects.create(
                workflow_id=wid, name="n", status="pending", input={"i": i, "s": "é"}
            )
        )
    return out


def _writes(runs: list[WorkflowRun]) -> list[Write]:
    """A mix: equal updates, a different one, journal and claim-event inserts,
    claim puts, timers around a delete (a barrier), a second update of a row."""
    picked = {"status": "running", "version": F("version") + 1, "turn_started_at": 7}
    writes: list[Write] = [Update(WorkflowRun, {"pk": r.pk}, dict(picked)) for r in runs[:2]]
    writes.append(Update(WorkflowRun, {"pk": runs[2].pk}, {"status": "parked", "wake_at": 99}))
    for n, run in enumerate(runs):
        writes.append(
            Insert(
                JournalEntry(
                    run=run,
                    position=n + 1,
                    kind="activity",
                    command=n,
                    target="t",
                    result={"v": [n, None, "ü"]},
                    engine_id="e",
                    epoch=2,
                    at_ms=1000 + n,
                )
            )
        )
        writes.append(PutClaim(run.workflow_id, 2, ("e", 5000 + n, 4000)))
        writes.append(
            Insert(
                ClaimEvent(
                    workflow_id=run.workflow_id,
                    epoch=2,
                    engine_id="e",
                    kind="acquired",
                    at_ms=4000,
                    reason="",
                )
            )
        )
    writes.append(Insert(Timer(run=runs[0], position=1, kind="sleep", fire_at=10)))
    writes.append(Delete(Timer, {"run": runs[0].pk, "kind": "sleep"}))
    writes.append(Insert(Timer(run=runs[0], position=2, kind="sleep", fire_at=20)))
    writes.append(PutClaim(runs[0].workflow_id, 3, (None, None, None)))
    writes.append(
        Update(WorkflowRun, {"pk": runs[0].pk}, {"status": "completed", "finished_at": AT})
    )
    return writes


def _rows(runs: list[WorkflowRun]) -> list[Any]:
    ids = [r.pk for r in runs]
    wids = [r.workflow_id for r in runs]
    skip = {"id", "workflow_id", "created_at", "updated_at", "run"}

    def rows(qs: Any) -> list[dict[str, Any]]:
        return [{k: v for k, v in model_to_dict(o).items() if k not in skip} for o in qs]

    return [
        rows(WorkflowRun.objects.filter(pk__in=ids).order_by("workflow_id")),
        list(
            WorkflowClaim.objects.filter(pk__in=wids)
            .order_by("pk")
            .values_list("epoch", "engine_id", "expires_at", "claimed_at")
        ),
        rows(JournalEntry.objects.filter(run__in=ids).order_by("run__workflow_id", "position")),
        rows(ClaimEvent.objects.filter(workflow_id__in=wids).order_by("id")),
        rows(Timer.objects.filter(run__in=ids).order_by("id")),
    ]


def _apply(vendor: store.StoreOps, writes: list[Write]) -> None:
    with transaction.atomic():
        apply_writes(vendor, writes, "default")


def test_grouped_and_one_by_one_leave_the_same_rows() -> None:
    grouped_runs, plain_runs = _world("g"), _world("p")
    grouped_writes, plain_writes = _writes(grouped_runs), _writes(plain_runs)
    _apply(store.ops("default"), grouped_writes)
    _apply(_OneByOne(), plain_writes)
    assert _rows(grouped_runs) == _rows(plain_runs)
    # The last writes of a row won, in both: the run completed, the claim released.
    first = WorkflowRun.objects.get(pk=grouped_runs[0].pk)
    assert (first.status, first.version, first.finished_at) == ("completed", 1, AT)
    assert WorkflowClaim.objects.get(pk=grouped_runs[0].workflow_id).engine_id is None
    assert list(Timer.objects.filter(run=grouped_runs[0]).values_list("fire_at", flat=True)) == [20]
    # Every inserted instance knows its row, in the order it was listed.
    inserted = [w.instance for w in grouped_writes if isinstance(w, Insert)]
    deleted = inserted.pop(-2)  # the timer the delete removed
    assert deleted.pk is not None and not Timer.objects.filter(pk=deleted.pk).exists()
    for instance in inserted:
        assert instance.pk is not None and not instance._state.adding
        stored = type(instance).objects.get(pk=instance.pk)
        assert model_to_dict(stored) == model_to_dict(instance)
    events = [i.pk for i in inserted if isinstance(i, ClaimEvent)]
    assert events == sorted(events)


def test_a_pickup_of_many_runs_is_one_write_statement() -> None:
    runs = _world("k", runs=8)
    writes: list[Write] = []
    for run in runs:
        writes.append(
            Update(WorkflowRun, {"pk": run.pk}, {"status": "running", "version": F("version") + 1})
        )
    for run in runs:
        writes.append(PutClaim(run.workflow_id, 2, ("e", 9000, 8000)))
        writes.append(
            Insert(
                ClaimEvent(
                    workflow_id=run.workflow_id, epoch=2, engine_id="e", kind="acquired", at_ms=1
                )
            )
        )
    with CaptureQueriesContext(connection) as queries:
        result = conditional_batch(
            [RunCondition(r.pk, statuses=frozenset({"pending"})) for r in runs], writes
        )
    assert result.committed
    sent = [q["sql"] for q in queries]
    if store.ops("default").supports_coalesced_writes:
        # Lock, check and every write: one statement, no BEGIN / COMMIT.
        assert len(sent) == 1, sent
        assert "FOR UPDATE" in sent[0] and 'INTO "weft_claimevent"' in sent[0]
    else:
        assert len([q for q in sent if q.startswith(("INSERT", "UPDATE"))]) == 3 * len(runs)
    assert set(
        WorkflowRun.objects.filter(pk__in=[r.pk for r in runs]).values_list("status", "version")
    ) == {("running", 1)}
    assert set(
        WorkflowClaim.objects.filter(pk__in=[r.workflow_id for r in runs]).values_list(
            "epoch", "engine_id"
        )
    ) == {(2, "e")}
    assert ClaimEvent.objects.filter(workflow_id__startswith="k-").count() == 8


def test_inside_a_transaction_the_writes_are_one_statement_after_the_lock() -> None:
    runs = _world("n", runs=4)
    writes: list[Write] = [
        Update(WorkflowRun, {"pk": r.pk}, {"status": "running", "version": F("version") + 1})
        for r in runs
    ]
    writes += [Insert(JournalEntry(run=r, position=1, kind="activity")) for r in runs]
    with CaptureQueriesContext(connection) as queries, transaction.atomic():
        result = conditional_batch(
            [RunCondition(r.pk, statuses=frozenset({"pending"})) for r in runs], writes
        )
    assert result.committed
    writing = [
        q["sql"]
        for q in queries
        if ('INTO "' in q["sql"] or 'UPDATE "' in q["sql"]) and "FOR UPDATE" not in q["sql"]
    ]
    expected = 1 if store.ops("default").supports_coalesced_writes else 2 * len(runs)
    assert len(writing) == expected, writing
    assert JournalEntry.objects.filter(run__in=runs).count() == 4


def test_a_failing_grouped_write_leaves_nothing_of_the_batch() -> None:
    runs = _world("f", runs=2)
    JournalEntry.objects.create(run=runs[1], position=1, kind="activity")
    writes: list[Write] = [
        Update(WorkflowRun, {"pk": runs[0].pk}, {"status": "running"}),
        PutClaim(runs[0].workflow_id, 5, ("e", 1, 1)),
        Insert(JournalEntry(run=runs[0], position=1, kind="activity")),
        Insert(JournalEntry(run=runs[1], position=1, kind="activity")),  # a duplicate
    ]
    with pytest.raises(DatabaseError):
        conditional_batch([RunCondition(runs[0].pk, statuses=frozenset({"pending"}))], writes)
    assert WorkflowRun.objects.get(pk=runs[0].pk).status == "pending"
    assert WorkflowClaim.objects.get(pk=runs[0].workflow_id).epoch == 1
    assert JournalEntry.objects.filter(run=runs[0]).count() == 0


def test_two_updates_of_one_run_apply_in_order() -> None:
    (run,) = _world("o", runs=1)
    _apply(
        store.ops("default"),
        [
            Update(WorkflowRun, {"pk": run.pk}, {"status": "running", "wake_at": 1}),
            Update(WorkflowRun, {"pk": run.pk}, {"status": "parked"}),
        ],
    )
    run.refresh_from_db()
    assert (run.status, run.wake_at) == ("parked", 1)


def test_two_puts_of_one_claim_apply_in_order() -> None:
    (run,) = _world("c", runs=1)
    _apply(
        store.ops("default"),
        [PutClaim(run.workflow_id, 2, ("a", 1, 1)), PutClaim(run.workflow_id, 3, ("b", 2, 2))],
    )
    claim = WorkflowClaim.objects.get(pk=run.workflow_id)
    assert (claim.epoch, claim.engine_id, claim.expires_at) == (3, "b", 2)


# -- the fence, in one statement -------------------------------------------------------


def _fenced_world(tag: str) -> WorkflowRun:
    WorkflowClaim.objects.create(
        workflow_id=tag, epoch=4, engine_id="me", expires_at=9_000, claimed_at=1_000
    )
    return WorkflowRun.objects.create(workflow_id=tag, name="n", status="running")


def _checkpoint(run: WorkflowRun, epoch: int = 4) -> Any:
    return conditional_batch(
        [
            ClaimCondition(run.workflow_id, epoch, ("me", None, None), "owner", "fence"),
            RunCondition(run.pk, statuses=frozenset({"running"})),
        ],
        [
            Insert(JournalEntry(run=run, position=1, kind="activity", epoch=epoch)),
            Update(WorkflowRun, {"pk": run.pk}, {"version": F("version") + 1}),
        ],
    )


def test_a_checkpoint_under_a_held_fence_is_one_statement() -> None:
    run = _fenced_world("fence-ok")
    with CaptureQueriesContext(connection) as queries:
        assert _checkpoint(run).committed
    if store.ops("default").supports_coalesced_writes:
        assert len(queries) == 1, [q["sql"] for q in queries]
    assert JournalEntry.objects.filter(run=run).count() == 1


@pytest.mark.parametrize(
    "claim",
    [
        {"epoch": 5},  # taken over: the epoch moved
        {"engine_id": "other"},
        {"expires_at": None},  # half-null: corrupt, never "me"
        {"claimed_at": -1},  # out of range: corrupt
        {"expires_at": 2**53},
    ],
    ids=["epoch", "holder", "half-null", "negative", "too-large"],
)
def test_a_fence_that_does_not_hold_writes_nothing_and_is_named(claim: dict[str, Any]) -> None:
    run = _fenced_world("fence-lost")
    WorkflowClaim.objects.filter(pk="fence-lost").update(**claim)
    result = _checkpoint(run)
    assert not result.committed
    assert result.failed_condition.label == "fence"
    assert not JournalEntry.objects.filter(run=run).exists()
    assert WorkflowRun.objects.get(pk=run.pk).version == 0


def test_a_takeover_committed_while_the_checkpoint_waits_is_seen() -> None:
    """The checkpoint waits for the claim row another transaction holds, then
    compares the row as that transaction left it: the fence fails, nothing is
    written (``FOR UPDATE`` re-checks the newest version)."""
    import threading

    from django.db import connections

    run = _fenced_world("fence-race")
    locked, release = threading.Event(), threading.Event()

    def taker() -> None:
        try:
            with transaction.atomic():
                WorkflowClaim.objects.select_for_update().filter(pk="fence-race").update(
                    epoch=5, engine_id="thief"
                )
                locked.set()
                release.wait(10)
        finally:
            connections.close_all()

    thread = threading.Thread(target=taker)
    thread.start()
    assert locked.wait(10)
    outcome: list[Any] = []
    writer = threading.Thread(
        target=lambda: (outcome.append(_checkpoint(run)), connections.close_all())
    )
    writer.start()
    writer.join(0.5)
    assert writer.is_alive()  # waiting for the claim row
    release.set()
    thread.join(10)
    writer.join(10)
    assert not outcome[0].committed and outcome[0].failed_condition.label == "fence"
    assert not JournalEntry.objects.filter(run=run).exists()
    assert WorkflowRun.objects.get(pk=run.pk).version == 0
