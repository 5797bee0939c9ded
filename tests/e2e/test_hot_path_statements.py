"""Statements per workflow on the hot path: start → NOTIFY → pickup → result.

What is counted: every SQL statement any Django connection of this process
runs (a ``connection.execute_wrapper`` installed on each connection as it is
created: the caller's and the started engine's poll, turn and activity
threads), from ``client.start`` of a three-step workflow to ``result()``
returning. The engine is started (background threads, LISTENing) with its
poll and renewal intervals far longer than the test, so everything it does
in the window was caused by the wakes: the start's pickup wake and the
turns. The LISTEN connections are psycopg's own, outside the count.

Why a bound: a pickup wake used to run the engine's whole maintenance pass
(retention, timeouts, reclaim, timers, woken and stranded runs: six reads)
and then one claim read per pending run before the pickup's batch -- about
41 statements per workflow. The pickup wake now runs only the batch pickup
(``engine.pickup``), whose claim rows are ensured and locked in one
statement. Then: ``client.start`` is one statement on PostgreSQL, its pickup NOTIFY
in it (``db.postgresql.start``), the pickup's batch sets no savepoint inside the pickup's
transaction, and the first turn starts from the run as the pickup committed
it (``engine.handoff``) instead of reading the run, its journal and its
timers again. PostgreSQL only (the pickup wake is a NOTIFY).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connection, connections
from django.db.backends.signals import connection_created

from weft_django import client
from weft_django.engine import Engine
from weft_django.engine.wakes import backends
from weft_django.transports.notify import NotifyBackend

#: Today's figure is 16: 13, plus one statement per activity for its started
#: marker (``engine.activities.started``, crash-loop containment: the settle
#: that deletes it stays one statement). It was 35 before the start lost its two savepoints,
#: the pickup's batch its savepoint and the first turn its three reads; 26
#: before the start became one statement with its NOTIFY in it; 24 before a
#: checkpoint -- lock, check and writes -- became one statement).
MAX_STATEMENTS_PER_WORKFLOW = 17
WORKFLOWS = 4


class StatementCounter:
    """Counts the statements of every Django connection of this process."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.active = False
        self.statements: list[str] = []

    def __call__(self, execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        if self.active:
            with self._lock:
                self.statements.append(sql)
        return execute(sql, params, many, context)

    def attach(self, sender: Any, connection: Any, **kwargs: Any) -> None:
        if self not in connection.execute_wrappers:
            connection.execute_wrappers.append(self)


@pytest.fixture
def counter() -> Iterator[StatementCounter]:
    counting = StatementCounter()
    connection_created.connect(counting.attach)
    connections.close_all()  # this thread's next connection is counted too
    try:
        yield counting
    finally:
        connection_created.disconnect(counting.attach)
        connections.close_all()


@pytest.mark.django_db(transaction=True)
def test_a_started_workflow_runs_at_most_17_statements(counter: StatementCounter) -> None:
    if connection.vendor != "postgresql":
        pytest.skip("the pickup wake is a PostgreSQL NOTIFY")
    assert any(isinstance(b, NotifyBackend) for b in backends.for_alias("default"))
    engine = Engine(poll_interval=300, claim_renew_interval=300, claim_ttl=900)
    engine.start()
    try:
        assert engine._tasks.first_pass.wait(30), "the engine's first maintenance pass"
        # Warm up: the first workflow of a process opens its connections.
        client.start("three-steps", {"id": "warm"}, workflow_id="hot-warm").result(timeout=30)
        counter.active = True
        for i in range(WORKFLOWS):
            handle = client.start("three-steps", {"id": f"h{i}"}, workflow_id=f"hot-{i}")
            assert handle.result(timeout=30) == [
                f"reserved:h{i}",
                {"order": f"h{i}", "charged": 1},
                f"shipped:h{i}",
            ]
        counter.active = False
    finally:
        engine.dispose(grace=5)
    per_workflow = len(counter.statements) / WORKFLOWS
    print(f"\n[statements] start → result: {per_workflow:.1f} per three-step workflow")
    assert per_workflow <= MAX_STATEMENTS_PER_WORKFLOW, counter.statements
