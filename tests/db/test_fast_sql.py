"""``update_by_pk`` and ``insert_row`` write exactly what the ORM writes, or decline.

Why: it replaces the ORM on the hottest statement of a turn (the run-row
update of every checkpoint, issue #7); a value adapted differently (JSON,
UUID, datetime, NULL) would corrupt stored runs silently.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import pytest
from django.db.models import F
from django.forms.models import model_to_dict

from weft_django.db.single_row import insert_row, update_by_pk
from weft_django.models import JournalEntry, Timer, WorkflowRun

pytestmark = pytest.mark.usefixtures("batch_db")


def _twin_runs() -> tuple[WorkflowRun, WorkflowRun]:
    def run(wid: str) -> WorkflowRun:
        return WorkflowRun.objects.create(
            workflow_id=wid, name="n", status="running", input={"x": [1, "é", None]}
        )

    return run("fast"), run("orm")


VALUE_SETS: list[dict[str, Any]] = [
    {"version": F("version") + 1, "status": "running", "turn_started_at": 17, "turn_pid": 42},
    {
        "status": "completed",
        "result": {"ok": True, "items": [1, 2.5, "ü", None], "nested": {"a": {}}},
        "error": None,
        "wake_at": None,
        "finished_at": datetime(2026, 11, 29, 12, 30, 15, 123456, tzinfo=UTC),
    },
    {"status": "failed", "result": None, "error": {"type": "ValueError", "message": "x'; --"}},
    {"wake_seq": F("wake_seq") + 3, "parked_seq": 2, "status": "parked", "wake_at": 10**13},
    {"result": "plain string", "suspended_reason": "r" * 500},
    {"result": [], "error": 0},
]


@pytest.mark.parametrize("values", VALUE_SETS)
def test_the_row_matches_what_the_orm_writes(values: dict[str, Any]) -> None:
    fast, orm = _twin_runs()
    assert update_by_pk(WorkflowRun, {"pk": str(fast.pk)}, values, "default")
    WorkflowRun.objects.filter(pk=orm.pk).update(**values)
    fast.refresh_from_db()
    orm.refresh_from_db()
    ignore = {"id", "workflow_id", "created_at"}
    as_fast = {k: v for k, v in model_to_dict(fast).items() if k not in ignore}
    as_orm = {k: v for k, v in model_to_dict(orm).items() if k not in ignore}
    assert as_fast == as_orm


def test_a_uuid_key_and_its_string_form_address_the_same_row() -> None:
    fast, _ = _twin_runs()
    assert update_by_pk(WorkflowRun, {"pk": fast.pk}, {"turn_pid": 1}, "default")
    assert update_by_pk(WorkflowRun, {"pk": str(fast.pk)}, {"turn_pid": 2}, "default")
    assert update_by_pk(WorkflowRun, {"pk": uuid.uuid4()}, {"turn_pid": 3}, "default")  # no row
    fast.refresh_from_db()
    assert fast.turn_pid == 2


@pytest.mark.parametrize(
    ("filters", "values"),
    [
        ({"pk": "x", "status": "running"}, {"turn_pid": 1}),  # not the pk alone
        ({"status": "running"}, {"turn_pid": 1}),
        ({"pk": "x"}, {}),
        ({"pk": "x"}, {"parent": None}),  # a relation
        ({"pk": "x"}, {"no_such_field": 1}),
        ({"pk": "x"}, {"version": F("wake_seq") + 1}),  # another field's value
        ({"pk": "x"}, {"version": F("version") - 1}),
        ({"pk": "x"}, {"version": F("version") + 1.5}),
    ],
)
def test_other_shapes_are_declined_for_the_orm(
    filters: dict[str, Any], values: dict[str, Any]
) -> None:
    assert not update_by_pk(WorkflowRun, filters, values, "default")


def test_a_model_with_an_integer_key() -> None:
    run, _ = _twin_runs()
    timer = Timer.objects.create(
        run=run, kind="sleep", position=1, fire_at=5, engine_id="e", epoch=1
    )
    assert update_by_pk(
        Timer, {"pk": timer.pk}, {"fire_at": 9, "payload": {"attempt": 2}}, "default"
    )
    timer.refresh_from_db()
    assert (timer.fire_at, timer.payload) == (9, {"attempt": 2})


# -- insert_row ---------------------------------------------------------------------------


def _journal_entry(run: WorkflowRun, position: int) -> JournalEntry:
    return JournalEntry(
        run=run,
        position=position,
        kind="activity",
        command=position,
        target="t" * 200,
        result={"value": [1, "é", None, {"deep": True}]},
        error=None,
        engine_id="engine-a",
        epoch=3,
        at_ms=1_700_000_000_123,
    )


def test_an_inserted_row_reads_back_as_the_orm_would_have_saved_it() -> None:
    run, _ = _twin_runs()
    fast, orm = _journal_entry(run, 1), _journal_entry(run, 2)
    assert insert_row(fast, "default")
    orm.save(force_insert=True)
    assert fast.pk is not None and fast.pk != orm.pk and not fast._state.adding
    stored_fast = model_to_dict(JournalEntry.objects.get(pk=fast.pk))
    stored_orm = model_to_dict(JournalEntry.objects.get(pk=orm.pk))
    for row in (stored_fast, stored_orm):
        row.pop("id")
        row.pop("position")
        row.pop("command")
    assert stored_fast == stored_orm
    assert stored_fast["result"] == {"value": [1, "é", None, {"deep": True}]}


def test_a_duplicate_journal_position_still_raises_integrity_error() -> None:
    from django.db import IntegrityError, transaction

    run, _ = _twin_runs()
    assert insert_row(_journal_entry(run, 1), "default")
    with pytest.raises(IntegrityError), transaction.atomic():
        insert_row(_journal_entry(run, 1), "default")


def test_other_models_and_listened_models_go_through_the_orm() -> None:
    from django.db.models.signals import post_save

    run, _ = _twin_runs()
    assert not insert_row(WorkflowRun(workflow_id="w", name="n"), "default")
    seen: list[Any] = []

    def listener(sender: Any, instance: Any, **kwargs: Any) -> None:
        seen.append(instance)

    post_save.connect(listener, sender=JournalEntry)
    try:
        assert not insert_row(_journal_entry(run, 1), "default")
    finally:
        post_save.disconnect(listener, sender=JournalEntry)
    assert insert_row(_journal_entry(run, 1), "default")
    assert JournalEntry.objects.filter(run=run).count() == 1
