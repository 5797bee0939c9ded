"""Hostile values at every client call: a ``WeftError`` with a stable code, nothing written.

Invariant protected: whatever a caller passes -- the wrong type, an empty or
oversized string, NUL or a lone surrogate (which PostgreSQL or the UTF-8
codec would refuse mid-write), NaN, a negative or infinite duration, a
non-JSON payload -- each client call either succeeds or raises a
``WeftError`` subclass with a stable ``code`` (``invalid_argument``,
``invalid_payload``, ``workflow_not_found``, ``async_activity_token``, ...),
never a bare ``TypeError`` / ``UnicodeEncodeError`` / ``KeyError`` from deep
inside, and a refused call writes nothing. A non-JSON payload is both a
``TypeError`` and a ``PayloadError`` at the call site.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.e2e.helpers import row_counts
from weft_django import client, workflow
from weft_django.engine.workflow.payload import normalize
from weft_django.errors import ERROR_CLASSES, InvalidArgumentError, PayloadError, WeftError
from weft_django.kernel.ids import is_storable_text, is_workflow_id
from weft_django.models import WorkflowRun

CODES = {cls.code for cls in ERROR_CLASSES} | {"unknown_queue"}


@workflow(name="hostile-wait")
def hostile_wait(ctx: Any, data: Any) -> Any:
    return (yield ctx.wait_for_signal("go"))


class _Opaque:
    def __repr__(self) -> str:
        return "<Opaque>"


#: Adversarial values of every kind (strategies below add generated ones).
HOSTILE: list[Any] = [
    None,
    0,
    -1,
    True,
    2**64,
    1.5,
    float("nan"),
    float("inf"),
    "",
    "x" * 5000,
    "\x00",
    "a\ud800",
    "'; DROP TABLE weft_django_workflowrun; --",
    "../../etc/passwd",
    [],
    {},
    {"a": {1, 2}},
    _Opaque(),
    b"bytes",
    ("t",),
    datetime(2030, 1, 1),
    timedelta(days=-1),
    timedelta(days=10**8),
]

WID = "hostile-live"

#: Each client call with the one argument under test in place; the others valid.
CALLS: dict[str, Callable[[Any], Any]] = {
    "start.name": lambda v: client.start(v, None),
    "start.input": lambda v: client.start("hostile-wait", v, workflow_id="hostile-in"),
    "start.workflow_id": lambda v: client.start("hostile-wait", None, workflow_id=v),
    "start.idempotency_key": lambda v: client.start("hostile-wait", None, idempotency_key=v),
    "start.start_after": lambda v: client.start("hostile-wait", None, start_after=v),
    "start.start_at": lambda v: client.start("hostile-wait", None, start_at=v),
    "start.execution_timeout": lambda v: client.start("hostile-wait", None, execution_timeout=v),
    "start.on_conflict": lambda v: client.start("hostile-wait", None, on_conflict=v),
    "start.queue": lambda v: client.start("hostile-wait", None, queue=v),
    "start.priority": lambda v: client.start("hostile-wait", None, priority=v),
    "start.concurrency_key": lambda v: client.start("hostile-wait", None, concurrency_key=v),
    "signal.workflow_id": lambda v: client.signal(v, "go", 1),
    "signal.name": lambda v: client.signal(WID, v, 1),
    "signal.payload": lambda v: client.signal(WID, "go", v),
    "signal_with_start.name": lambda v: client.signal_with_start(v, None, "hostile-sws", "go"),
    "signal_with_start.input": lambda v: client.signal_with_start(
        "hostile-wait", v, "hostile-sws", "go"
    ),
    "signal_with_start.workflow_id": lambda v: client.signal_with_start(
        "hostile-wait", None, v, "go"
    ),
    "signal_with_start.signal": lambda v: client.signal_with_start(
        "hostile-wait", None, "hostile-sws", v
    ),
    "signal_with_start.payload": lambda v: client.signal_with_start(
        "hostile-wait", None, "hostile-sws", "go", v
    ),
    "query.workflow_id": lambda v: client.query(v, "state"),
    "query.name": lambda v: client.query(WID, v),
    "update.workflow_id": lambda v: client.update(v, "u", timeout=0),
    "update.name": lambda v: client.update(WID, v, timeout=0),
    "update.args": lambda v: client.update(WID, "u", v, timeout=0),
    "update.update_id": lambda v: client.update(WID, "u", update_id=v, timeout=0),
    "update.timeout": lambda v: client.update(WID, "u", timeout=v),
    "complete_async_activity.token": lambda v: client.complete_async_activity(v, 1),
    "complete_async_activity.result": lambda v: client.complete_async_activity("t" * 43, v),
    "fail_async_activity.token": lambda v: client.fail_async_activity(v, "declined"),
    "fail_async_activity.error": lambda v: client.fail_async_activity("t" * 43, v),
    "cancel.workflow_id": lambda v: client.cancel(v),
    "cancel.reason": lambda v: client.cancel(WID, reason=v),
    "suspend.reason": lambda v: client.suspend(WID, reason=v),
    "suspend.workflow_id": lambda v: client.suspend(v),
    "resume.workflow_id": lambda v: client.resume(v),
    "retry.workflow_id": lambda v: client.retry(v),
    "get_handle.workflow_id": lambda v: client.get_handle(v),
    "get_events.workflow_id": lambda v: client.get_events(v),
    "purge.workflow_id": lambda v: client.purge(v),
    "purge.older_than": lambda v: client.purge(older_than=v),
    "force_release.workflow_id": lambda v: client.force_release(v),
    "list_runs.status": lambda v: client.list_runs(status=v),
    "ownership_status.workflow_id": lambda v: client.ownership_status(v),
    "cancel_many.reason": lambda v: client.cancel_many(
        client.RunFilter(workflow_id=("hostile-none",)), reason=v
    ),
    "cancel_many.chunk_size": lambda v: client.cancel_many(
        client.RunFilter(workflow_id=("hostile-none",)), chunk_size=v
    ),
    "resume_many.filter": lambda v: client.resume_many(v),
    "create_schedule.schedule_id": lambda v: client.create_schedule(v, "hostile-wait", every=60),
    "create_schedule.workflow": lambda v: client.create_schedule("hostile-s", v, every=60),
    "create_schedule.cron": lambda v: client.create_schedule("hostile-s", "hostile-wait", cron=v),
    "create_schedule.every": lambda v: client.create_schedule("hostile-s", "hostile-wait", every=v),
    "create_schedule.timezone": lambda v: client.create_schedule(
        "hostile-s", "hostile-wait", every=60, timezone=v
    ),
    "create_schedule.input": lambda v: client.create_schedule(
        "hostile-s", "hostile-wait", v, every=60
    ),
    "describe_schedule.schedule_id": lambda v: client.describe_schedule(v),
    "pause_schedule.schedule_id": lambda v: client.pause_schedule(v),
    "delete_schedule.schedule_id": lambda v: client.delete_schedule(v),
    "trigger_schedule.schedule_id": lambda v: client.trigger_schedule(v),
    "backfill_schedule.start": lambda v: client.backfill_schedule(
        "hostile-none", v, datetime(2030, 1, 1, tzinfo=UTC)
    ),
    "count_runs.workflow_id": lambda v: client.count_runs(workflow_id=v),
}


def _json(value: Any) -> bool:
    try:
        normalize("value", value)
    except PayloadError:
        return False
    return True


def _name(value: Any) -> bool:
    return isinstance(value, str) and 0 < len(value) <= 200 and is_storable_text(value)


def _seconds(value: Any) -> bool:
    return (isinstance(value, int | float) and not isinstance(value, bool) and value >= 0) or (
        isinstance(value, timedelta) and value >= timedelta(0)
    )


def _reason(value: Any) -> bool:
    return isinstance(value, str) and is_storable_text(value)


#: Values a call legitimately accepts (it then does its normal work); any other
#: value it accepts fails the test.
ACCEPTED: dict[str, Callable[[Any], bool]] = {
    "start.input": _json,
    "start.workflow_id": lambda v: v is None or is_workflow_id(v),
    "start.idempotency_key": lambda v: v is None or (_name(v) and len(v) <= 255),
    "start.start_after": lambda v: v is None or _seconds(v),
    "start.execution_timeout": lambda v: v is None or _seconds(v),
    "start.start_at": lambda v: v is None or (isinstance(v, datetime) and v.tzinfo is not None),
    "start.queue": lambda v: v is None,
    "start.priority": lambda v: isinstance(v, int) and -(2**31) <= v < 2**31,
    "start.concurrency_key": lambda v: v is None,
    "signal.name": _name,
    "signal.payload": _json,
    "signal_with_start.input": _json,
    "signal_with_start.signal": _name,
    "signal_with_start.payload": _json,
    "update.args": _json,
    "cancel.reason": _reason,
    "suspend.reason": _reason,
    "purge.older_than": lambda v: isinstance(v, timedelta) and v >= timedelta(0),
    "list_runs.status": lambda v: True,
    "cancel_many.reason": _reason,
    "cancel_many.chunk_size": lambda v: isinstance(v, int) and not isinstance(v, bool) and v > 0,
    "create_schedule.input": _json,
    "create_schedule.every": lambda v: _seconds(v) and bool(v),
    "count_runs.workflow_id": lambda v: True,
}


def _check(call: str, value: Any) -> None:
    """Run one call; a refusal must be a WeftError with a stable code and write nothing."""
    WorkflowRun.objects.exclude(workflow_id=WID).delete()  # a previous accepted start
    before = row_counts()
    try:
        CALLS[call](value)
    except WeftError as error:
        assert error.code in CODES, (call, value, error)
        assert str(error), (call, value)
        assert row_counts() == before, f"{call}({value!r:.60}) was refused but wrote"
        return
    except Exception as error:  # a bare exception from deep inside: the bug this hunts
        pytest.fail(f"{call}({value!r:.60}) raised {type(error).__name__}: {error!s:.200}")
    accepted = ACCEPTED.get(call, lambda v: False)
    assert accepted(value), f"{call}({value!r:.60}) accepted a value it should refuse"


@pytest.fixture
def live_run(db: None) -> None:
    client.start("hostile-wait", None, workflow_id=WID)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("call", sorted(CALLS))
def test_every_client_argument_refuses_hostile_values_cleanly(live_run: None, call: str) -> None:
    for value in HOSTILE:
        _check(call, value)


TEXT = st.text(
    alphabet=st.characters(codec=None, exclude_categories=()), max_size=300
) | st.sampled_from(["\x00", "\ud800x", "é" * 201, " "])
ANY = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | TEXT
    | st.binary(max_size=8)
    | st.datetimes()
    | st.timedeltas(),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.text(max_size=5), inner, max_size=3)
        | st.sets(st.integers(), max_size=2)
    ),
    max_leaves=8,
)


@pytest.mark.django_db(transaction=True)
@settings(
    max_examples=300,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=list(HealthCheck),
)
@given(call=st.sampled_from(sorted(CALLS)), value=ANY)
def test_generated_values_never_escape_as_bare_exceptions(
    live_run: None, call: str, value: Any
) -> None:
    _check(call, value)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("value", [object(), {1, 2}, {"k": object()}, b"raw", _Opaque()])
def test_a_non_json_start_input_is_a_type_error_and_a_payload_error(value: Any) -> None:
    before = row_counts()
    with pytest.raises(TypeError) as info:
        client.start("hostile-wait", value, workflow_id="hostile-typed")
    assert isinstance(info.value, PayloadError)
    assert isinstance(info.value, ValueError)  # callers catching ValueError still do
    assert info.value.code == "invalid_payload"
    assert info.value.what == "workflow input"
    assert not WorkflowRun.objects.filter(workflow_id="hostile-typed").exists()
    assert row_counts() == before


@pytest.mark.django_db(transaction=True)
def test_every_payload_call_refuses_non_json_as_a_type_error(live_run: None) -> None:
    bad = {1, 2}
    calls: list[Callable[[], Any]] = [
        lambda: client.signal(WID, "go", bad),
        lambda: client.signal_with_start("hostile-wait", bad, "hostile-sws2", "go"),
        lambda: client.signal_with_start("hostile-wait", None, "hostile-sws2", "go", bad),
        lambda: client.update(WID, "u", bad, timeout=0),
        lambda: client.complete_async_activity("t" * 43, bad),
        lambda: client.fail_async_activity("t" * 43, {"message": "m", "details": bad}),
    ]
    before = row_counts()
    for call in calls:
        with pytest.raises(TypeError) as info:
            call()
        assert isinstance(info.value, PayloadError), info.value
    assert row_counts() == before


@pytest.mark.django_db(transaction=True)
def test_invalid_argument_names_the_argument_and_value(live_run: None) -> None:
    with pytest.raises(InvalidArgumentError) as info:
        client.signal(WID, "bad\x00name", 1)
    assert info.value.argument == "signal name"
    assert "'bad\\x00name'" in str(info.value)
    assert info.value.as_dict()["code"] == "invalid_argument"
    with pytest.raises(InvalidArgumentError, match="priority must be an integer, got 'high'"):
        client.start("hostile-wait", None, priority="high")
