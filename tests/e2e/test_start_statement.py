"""``client.start`` in one statement on PostgreSQL (``db.postgresql.start``).

Invariants protected: a start with nothing in its way is ONE statement,
its pickup NOTIFY inside it (no NOTIFY after the commit) and the wake
delivered on commit only -- a start rolled back with the caller's
transaction leaves no run and wakes nobody; whatever stands in the way (a
live run, a finished one without ``start-new``, a concurrent start) is
still reported exactly as by the slow path.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from weft_django import client, workflow
from weft_django.engine.wakes import Wake, WakeBackend, backends
from weft_django.errors import InvalidTransitionError, WorkflowAlreadyRunning
from weft_django.models import WorkflowRun


@workflow(name="st-echo")
def st_echo(ctx: Any, data: Any) -> Any:
    return data
    yield  # pragma: no cover - makes this a generator


class Recording(WakeBackend):
    """A second backend: it must still be delivered to, after the commit."""

    name = "recording"

    def __init__(self) -> None:
        self.delivered: list[Wake] = []

    def deliver(self, wake: Wake) -> None:
        self.delivered.append(wake)


@pytest.fixture
def recording() -> Iterator[Recording]:
    backend = backends.install(Recording())
    assert isinstance(backend, Recording)
    try:
        yield backend
    finally:
        backends.uninstall(Recording)


@pytest.fixture(autouse=True)
def _postgresql_only() -> None:
    if connection.vendor != "postgresql":
        pytest.skip("the one-statement start is PostgreSQL's")


@pytest.mark.django_db(transaction=True)
def test_a_start_is_one_statement_with_its_notify_in_it(recording: Recording) -> None:
    with CaptureQueriesContext(connection) as queries:
        handle = client.start("st-echo", {"a": 1}, workflow_id="st-one")
    statements = [q["sql"] for q in queries.captured_queries]
    assert len(statements) == 1, statements
    assert "pg_notify" in statements[0] and "INSERT" in statements[0]
    run = WorkflowRun.objects.get(pk=handle.run_id)
    assert (run.workflow_id, run.status, run.input, run.name) == (
        "st-one",
        "pending",
        {"a": 1},
        "st-echo",
    )
    assert run.created_at is not None and run.version == 0
    # The other backend still gets the wake; NOTIFY's own is marked delivered.
    assert [(w.event, w.run_id, w.delivered_by) for w in recording.delivered] == [
        ("start", handle.run_id, frozenset({"notify"}))
    ]


@pytest.mark.django_db(transaction=True)
def test_a_rolled_back_start_leaves_no_run_and_wakes_nobody(recording: Recording) -> None:
    import psycopg

    params = connection.get_connection_params()
    for private in ("cursor_factory", "context", "prepare_threshold", "server_side_binding"):
        params.pop(private, None)
    with psycopg.connect(autocommit=True, **params) as listener:
        listener.execute("LISTEN weft_wake")
        with pytest.raises(RuntimeError), transaction.atomic():
            client.start("st-echo", 1, workflow_id="st-rolled")
            raise RuntimeError("the view failed")
        client.start("st-echo", 2, workflow_id="st-kept")
        notes = [n.payload for n in listener.notifies(timeout=1.0, stop_after=1)]
    assert notes == ["pickup st-kept"]
    assert not WorkflowRun.objects.filter(workflow_id="st-rolled").exists()
    assert [w.workflow_id for w in recording.delivered] == ["st-kept"]


@pytest.mark.django_db(transaction=True)
def test_what_stands_in_the_way_is_reported_as_before() -> None:
    live = client.start("st-echo", 1, workflow_id="st-live")
    with pytest.raises(WorkflowAlreadyRunning) as info:
        client.start("st-echo", 2, workflow_id="st-live")
    assert info.value.run_id == live.run_id
    assert WorkflowRun.objects.filter(workflow_id="st-live").count() == 1
    WorkflowRun.objects.filter(pk=live.run_id).update(status="completed")
    with pytest.raises(InvalidTransitionError):
        client.start("st-echo", 3, workflow_id="st-live")
    again = client.start("st-echo", 4, workflow_id="st-live", on_conflict="start-new")
    assert again.run_id != live.run_id
    assert WorkflowRun.objects.get(pk=again.run_id).status == "pending"
    with pytest.raises(WorkflowAlreadyRunning):
        client.start("st-echo", 5, workflow_id="st-live", on_conflict="start-new")
