"""Routed activities (``@activity(celery_queue=...)``), in process (SQLite and PostgreSQL).

A fake dispatcher stands in for Celery: it either runs each message on a
thread as a worker would (``run_routed``), drops it (a lost message), or
hands it to the test (to answer late). The real-worker tests are in
``tests/celery/test_routed.py``.
"""

from __future__ import annotations

import asyncio
import queue
import re
import threading
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.db import connections

from tests.e2e.helpers import journal
from tests.support import wait_for
from weft_django import activity, activity_info, client, workflow
from weft_django.engine.activities.routed import RoutedMessage, dispatchers, report_routed
from weft_django.engine.workflow.definitions import registry
from weft_django.errors import ActivityError
from weft_django.models import JournalEntry, RoutedAttempt, WorkflowClaim
from weft_django.transports.celery.routed import run_routed

CALLS: list[tuple[str, int]] = []
FAILS: dict[str, int] = {}


@activity(
    name="routed.double", celery_queue="gpu", timeout=timedelta(seconds=20), retries=2, backoff=0
)
def routed_double(x: int) -> dict[str, Any]:
    info = activity_info()
    CALLS.append(("double", info.attempt))
    if FAILS.get("double", 0) > 0:
        FAILS["double"] -= 1
        raise ConnectionError("gpu busy")
    return {"value": 2 * x, "attempt": info.attempt, "key": info.idempotency_key}


@activity(
    name="routed.strict",
    celery_queue="gpu",
    timeout=timedelta(seconds=20),
    retries=3,
    backoff=0,
    non_retryable=[ValueError],
)
def routed_strict(x: int) -> int:
    CALLS.append(("strict", activity_info().attempt))
    raise ValueError(f"bad input {x}")


@activity(
    name="routed.short", celery_queue="gpu", timeout=timedelta(seconds=1), retries=1, backoff=0
)
def routed_short(x: int) -> int:
    CALLS.append(("short", activity_info().attempt))
    return x + 1


@workflow(name="routed-flow")
def routed_flow(ctx, data):
    try:
        return (yield ctx.run(data["activity"], data["x"]))
    except ActivityError as exc:
        return {"error": exc.error_type, "kind": exc.kind, "attempts": exc.attempts}


class FakeDispatcher:
    """``mode``: "run" (a worker thread runs it), "drop" first N, or "hold" (the test answers)."""

    name = "fake"

    def __init__(self) -> None:
        self.sent: list[RoutedMessage] = []
        self.held: queue.Queue[RoutedMessage] = queue.Queue()
        self.drop = 0
        self.hold = False
        self.outcomes: list[str] = []

    def send(self, message: RoutedMessage) -> None:
        self.sent.append(message)
        if self.drop > 0:
            self.drop -= 1
            return
        if self.hold:
            self.held.put(message)
            return

        def work() -> None:
            try:
                self.outcomes.append(run_routed(message, worker="fake-worker"))
            finally:
                connections.close_all()

        threading.Thread(target=work, daemon=True).start()


@pytest.fixture
def fake() -> Iterator[FakeDispatcher]:
    CALLS.clear()
    FAILS.clear()
    dispatcher = FakeDispatcher()
    dispatchers.install(dispatcher)
    try:
        yield dispatcher
    finally:
        dispatchers.uninstall(dispatcher)
        # The waiting attempts read through Django's async ORM, on asgiref's one
        # sync thread: close that thread's connection before the database goes.
        asyncio.run(sync_to_async(connections.close_all)())


_ROUTED = {
    name: registry.activities[name] for name in ("routed.double", "routed.strict", "routed.short")
}


@pytest.fixture(scope="module", autouse=True)
def _routed_registered() -> Iterator[None]:
    """The routed activities exist only while this module's tests run
    (``weft.E035`` elsewhere); pytest-django may split the module in two."""
    with registry.lock:
        registry.activities.update(_ROUTED)
    yield
    with registry.lock:
        for name in _ROUTED:
            registry.activities.pop(name, None)


def _drive(weft_env: Any) -> tuple[threading.Thread, list[BaseException]]:
    errors: list[BaseException] = []

    def drive() -> None:
        try:
            weft_env.run_until_idle(timeout=60)
        except BaseException as exc:  # reported by the test
            errors.append(exc)
        finally:
            connections.close_all()

    thread = threading.Thread(target=drive, daemon=True)
    thread.start()
    return thread, errors


def _rows(run_id: Any) -> list[tuple[int, str]]:
    return list(
        RoutedAttempt.objects.filter(run_id=run_id)
        .order_by("attempt", "created_at")
        .values_list("attempt", "status")
    )


def _results(run_id: Any) -> list[str]:
    return [kind for kind, target in journal(run_id) if target.startswith("routed.")]


# -- definition time -------------------------------------------------------------------


def test_atomic_with_celery_queue_is_refused_naming_the_value() -> None:
    with pytest.raises(TypeError, match=r"celery_queue='gpu' cannot be combined with atomic=True"):
        activity(name="routed.bad-atomic", atomic=True, celery_queue="gpu", timeout=5)(lambda: 1)
    assert "routed.bad-atomic" not in registry.activities


@pytest.mark.parametrize(
    ("options", "error", "needle"),
    [
        ({"celery_queue": "gpu"}, ValueError, "needs a timeout="),
        ({"celery_queue": "", "timeout": 5}, ValueError, "celery_queue must be a non-empty"),
        ({"celery_queue": " gpu", "timeout": 5}, ValueError, "got ' gpu'"),
        ({"celery_queue": 7, "timeout": 5}, ValueError, "got 7"),
        (
            {"celery_queue": "gpu", "timeout": 5, "heartbeat_timeout": 1},
            TypeError,
            "heartbeat_timeout cannot be combined with celery_queue='gpu'",
        ),
    ],
)
def test_bad_routing_options_fail_at_definition(
    options: dict[str, Any], error: type[Exception], needle: str
) -> None:
    with pytest.raises(error, match=re.escape(needle)):
        activity(name="routed.bad", **options)(lambda: 1)
    assert "routed.bad" not in registry.activities


def test_checks_name_the_routed_activity_without_a_dispatcher() -> None:
    from weft_django.checks.routing import check_routed_activities

    assert dispatchers.current() is None
    [error] = check_routed_activities()
    assert error.id == "weft.E035"
    assert "'routed.double' (celery_queue='gpu')" in error.msg
    dispatcher = FakeDispatcher()
    dispatchers.install(dispatcher)
    try:
        assert check_routed_activities() == []
    finally:
        dispatchers.uninstall(dispatcher)


# -- the routed path -------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_the_routed_result_lands_through_the_token(weft_env, fake: FakeDispatcher) -> None:
    h = client.start("routed-flow", {"activity": "routed.double", "x": 21}, workflow_id="rt-1")
    weft_env.run_until_idle()
    assert h.status() == "completed", h.error()
    assert h.result(timeout=1) == {
        "value": 42,
        "attempt": 1,
        "key": f"rt-1:{fake.sent[0].position}",
    }
    [message] = fake.sent
    assert message.queue == "gpu" and message.activity == "routed.double"
    assert message.args == [21] and message.deadline_ms is not None
    row = RoutedAttempt.objects.get(run_id=h.run_id)
    assert (row.status, row.worker, row.attempt) == ("completed", "fake-worker", 1)
    assert message.token not in (row.pk, str(row.pk))  # stored hashed
    stored = [*RoutedAttempt.objects.values_list(), *JournalEntry.objects.values_list()]
    assert message.token not in repr(stored), "the raw token is stored nowhere"
    assert row.epoch == message.epoch > 0
    assert fake.outcomes == ["accepted"]
    assert _results(h.run_id) == ["activity"]


@pytest.mark.django_db(transaction=True)
def test_a_remote_failure_retries_per_policy(weft_env, fake: FakeDispatcher) -> None:
    FAILS["double"] = 2
    h = client.start("routed-flow", {"activity": "routed.double", "x": 1}, workflow_id="rt-2")
    weft_env.run_until_idle()
    assert h.status() == "completed", h.error()
    assert h.result(timeout=1)["attempt"] == 3
    assert CALLS == [("double", 1), ("double", 2), ("double", 3)]
    assert _rows(h.run_id) == [(1, "failed"), (2, "failed"), (3, "completed")]
    assert len({m.token for m in fake.sent}) == 3, "each attempt has its own token"


@pytest.mark.django_db(transaction=True)
def test_retries_exhausted_and_non_retryable_are_journaled_as_the_remote_type(
    weft_env, fake: FakeDispatcher
) -> None:
    FAILS["double"] = 5
    h = client.start("routed-flow", {"activity": "routed.double", "x": 1}, workflow_id="rt-3")
    s = client.start("routed-flow", {"activity": "routed.strict", "x": 1}, workflow_id="rt-4")
    weft_env.run_until_idle()
    assert h.result(timeout=1) == {"error": "ConnectionError", "kind": "error", "attempts": 3}
    assert s.result(timeout=1) == {"error": "ValueError", "kind": "non_retryable", "attempts": 1}
    assert [c for c in CALLS if c[0] == "strict"] == [("strict", 1)]


@pytest.mark.django_db(transaction=True)
def test_a_lost_message_is_re_sent_after_the_timeout(weft_env, fake: FakeDispatcher) -> None:
    fake.drop = 1
    h = client.start("routed-flow", {"activity": "routed.short", "x": 4}, workflow_id="rt-5")
    weft_env.run_until_idle()
    assert h.status() == "completed", h.error()
    assert h.result(timeout=1) == 5
    assert [m.attempt for m in fake.sent] == [1, 2]
    assert CALLS == [("short", 2)], "the lost attempt never ran; the re-sent one ran once"
    assert _rows(h.run_id) == [(1, "expired"), (2, "completed")]
    # The lost message delivered late: skipped, and its answer refused.
    assert run_routed(fake.sent[0]) == "stale"
    assert report_routed(fake.sent[0].token, result=99) is False


@pytest.mark.django_db(transaction=True)
def test_an_answer_after_the_last_attempt_timed_out_is_refused(
    weft_env, fake: FakeDispatcher
) -> None:
    fake.drop = 2
    h = client.start("routed-flow", {"activity": "routed.short", "x": 4}, workflow_id="rt-8")
    weft_env.run_until_idle()
    result = h.result(timeout=1)
    assert (result["kind"], result["attempts"]) == ("timeout", 2)
    assert _rows(h.run_id) == [(1, "expired"), (2, "expired")]
    assert report_routed(fake.sent[1].token, result=5) is False
    assert run_routed(fake.sent[1]) == "stale"
    assert CALLS == []


def _held(fake: FakeDispatcher) -> RoutedMessage:
    return wait_for("a routed message", lambda: _get(fake.held))


def _get(q: queue.Queue[RoutedMessage]) -> RoutedMessage | None:
    try:
        return q.get_nowait()
    except queue.Empty:
        return None


@pytest.mark.django_db(transaction=True)
def test_a_result_after_the_run_was_cancelled_is_discarded(weft_env, fake: FakeDispatcher) -> None:
    fake.hold = True
    h = client.start("routed-flow", {"activity": "routed.double", "x": 3}, workflow_id="rt-6")
    thread, errors = _drive(weft_env)
    message = _held(fake)
    client.cancel("rt-6", "changed my mind")
    thread.join(timeout=60)
    assert not thread.is_alive() and not errors
    assert h.status() == "cancelled"
    assert run_routed(message) == "stale", "a worker does not even run it"
    assert report_routed(message.token, result={"value": 6}) is False
    assert _rows(h.run_id) == [(1, "pending")]
    assert _results(h.run_id) == []
    assert CALLS == []


@pytest.mark.django_db(transaction=True)
def test_a_result_sent_before_a_claim_rotation_is_discarded(weft_env, fake: FakeDispatcher) -> None:
    fake.hold = True
    h = client.start("routed-flow", {"activity": "routed.double", "x": 5}, workflow_id="rt-7")
    thread, errors = _drive(weft_env)
    first = _held(fake)
    epoch = WorkflowClaim.objects.get(pk="rt-7").epoch
    client.suspend("rt-7")  # rotates the claim
    thread.join(timeout=60)
    assert not thread.is_alive() and not errors
    assert WorkflowClaim.objects.get(pk="rt-7").epoch > epoch
    assert first.epoch == epoch
    assert report_routed(first.token, result={"value": "stale"}) is False
    assert _rows(h.run_id) == [(1, "pending")], "nothing was written"

    client.resume("rt-7")
    thread, errors = _drive(weft_env)
    second = _held(fake)
    assert second.token != first.token and second.epoch > epoch
    assert _rows(h.run_id) == [(1, "expired"), (1, "pending")]
    assert run_routed(first) == "stale"
    assert run_routed(second, worker="w2") == "accepted"
    thread.join(timeout=60)
    assert not errors
    # The second drive may have ended before the answer landed; finish the run.
    weft_env.run_until_idle()
    assert h.status() == "completed", h.error()
    assert h.result(timeout=1)["value"] == 10
    assert _results(h.run_id) == ["activity"]


def test_message_round_trips_as_json() -> None:
    message = RoutedMessage("t", "a", "q", [1], {"k": 2}, "w", "r", 3, 1, 7, "w:3", 123)
    assert RoutedMessage.from_json(message.as_json()) == message
    assert RoutedMessage.from_json({**message.as_json(), "future": 1}) == message
