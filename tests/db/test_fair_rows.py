"""The fair admission's one read (``db.fair.fair_rows``) and its use by ``fair_ids``.

Protects: the statement reads the same waiting runs as
``pending_due(queued=True).filter(queue=...)`` (pending, due, of the queue:
nothing delayed, running or of another queue), each group's size, weight
and oldest runs in order, and each fairness key's latest admissions (only
slots of the queue that count for the rate, a NULL key included); and a
group handed more picks than the read's depth still gets its oldest runs,
in order (the second read). Both databases.
"""

from __future__ import annotations

import datetime as dt
import uuid

import pytest
from django.test import override_settings
from django.utils import timezone

from tests.support import ManualClock
from weft_django.db.fair import fair_rows
from weft_django.engine import Engine
from weft_django.engine.maintenance.pickup import pending_due
from weft_django.engine.queues.fair import fair_ids
from weft_django.models import QueueSlot, WorkflowRun

pytestmark = pytest.mark.django_db(transaction=True)

QUEUES = {"fq": {"concurrency": 100, "per_key_concurrency": 1, "fair": True}}
BASE = timezone.now() - dt.timedelta(hours=1)


def _run(workflow_id: str, n: int, **fields: object) -> WorkflowRun:
    run = WorkflowRun.objects.create(
        workflow_id=workflow_id, name="n", status=fields.pop("status", "pending"), **fields
    )
    WorkflowRun.objects.filter(pk=run.pk).update(created_at=BASE + dt.timedelta(seconds=n))
    return run


def _slot(workflow_id: str, fkey: str | None, at: int, **fields: object) -> None:
    QueueSlot.objects.create(
        queue=fields.pop("queue", "fq"),
        workflow_id=workflow_id,
        epoch=1,
        run_id=uuid.uuid4(),
        fairness_key=fkey,
        admitted_at=at,
        **fields,
    )


def test_the_read_is_the_twin_of_pending_due_with_groups_and_history(clock: ManualClock) -> None:
    now = clock.now
    _run("a-2", 2, queue="fq", fairness_key="a", concurrency_key="x", fairness_weight=2)
    _run("a-1", 1, queue="fq", fairness_key="a", concurrency_key="x")
    _run("a-3", 3, queue="fq", fairness_key="a", concurrency_key="y")
    _run("b-1", 4, queue="fq", fairness_key="b", concurrency_key="z", priority=5)
    _run("none-1", 5, queue="fq")
    _run("due", 6, queue="fq", fairness_key="b", concurrency_key="z", priority=5, start_at=now - 1)
    _run("delayed", 0, queue="fq", fairness_key="a", concurrency_key="x", start_at=now + 60_000)
    _run("running", 0, queue="fq", fairness_key="a", concurrency_key="x", status="running")
    _run("other", 0, queue="other-q", fairness_key="a", concurrency_key="x")
    for n, at in enumerate((10, 30, 20)):
        _slot(f"sa-{n}", "a", at)
    _slot("sb-0", "b", 40)
    _slot("sb-1", "b", 50, counts_for_rate=False)  # a readmission: no turn
    _slot("sb-2", "b", 60, position=3)  # not an admission
    _slot("sb-3", "b", 70, queue="other-q")
    _slot("sn-0", None, 5)
    with override_settings(WEFT={"QUEUES": QUEUES}):
        engine = Engine("engine-a", clock=clock)
        try:
            due = pending_due(engine, queued=True).filter(queue="fq")
            expected = set(due.values_list("workflow_id", flat=True))
            read = fair_rows("default", "fq", engine.now_ms(), 100)
        finally:
            engine.dispose(grace=0)
    assert {w for ids in read.ids.values() for w in ids} == expected
    assert read.ids == {
        (0, "a", "x"): ["a-1", "a-2"],
        (0, "a", "y"): ["a-3"],
        (5, "b", "z"): ["b-1", "due"],
        (0, None, None): ["none-1"],
    }
    assert {g: (n, w) for g, (n, _, w) in read.groups.items()} == {
        (0, "a", "x"): (2, 2),
        (0, "a", "y"): (1, 1),
        (5, "b", "z"): (2, 1),
        (0, None, None): (1, 1),
    }
    # "a" has weight 2: its two latest admissions; the others one.
    assert read.history == {"a": [30, 20], "b": [40], None: [5]}
    # Shallow: depth ceil(1 / 4 groups) = 1, the oldest of each group only.
    with override_settings(WEFT={"QUEUES": QUEUES}):
        shallow = fair_rows("default", "fq", clock.now, 1)
    assert {g: ids for g, ids in shallow.ids.items()} == {
        (0, "a", "x"): ["a-1"],
        (0, "a", "y"): ["a-3"],
        (5, "b", "z"): ["b-1"],
        (0, None, None): ["none-1"],
    }


def test_a_group_given_more_picks_than_the_depth_gets_its_oldest_in_order(
    clock: ManualClock,
) -> None:
    for n in range(5):
        _run(f"a-{n}", n, queue="fq", fairness_key="a")
        _run(f"b-{n}", 10 + n, queue="fq", fairness_key="b", concurrency_key="full")
    with override_settings(WEFT={"QUEUES": QUEUES}):
        engine = Engine("engine-a", clock=clock)
        try:
            spec = engine.settings.queues["fq"]
            due = pending_due(engine, queued=True).filter(queue="fq")
            # Two groups, want 4: the read holds 2 of each; "full" has no room,
            # so all four picks are "a"'s.
            ids = fair_ids(spec, due, "default", engine.now_ms(), 4, {"full": 1})
        finally:
            engine.dispose(grace=0)
    assert ids == ["a-0", "a-1", "a-2", "a-3"]
