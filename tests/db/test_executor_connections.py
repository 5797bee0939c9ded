"""Activity worker threads keep their database connection between attempts.

Why: a sync activity that queries the database must not pay a new
PostgreSQL session per attempt (10-16 ms each); the executor's workers are
persistent threads, and an attempt that raised closes a connection only if
it became unusable.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support import db_session_id
from weft_django.engine.activities.executor import ActivityExecutor
from weft_django.engine.activities.info import ActivityInfo, AttemptControl
from weft_django.engine.workflow.activity_definition import ActivityDefinition
from weft_django.kernel.clock import wall_ms

pytestmark = pytest.mark.django_db(transaction=True)


def _query_then(fail: bool) -> Any:
    session = db_session_id()
    if fail:
        raise ValueError(session)
    return session


def _info(position: int) -> ActivityInfo:
    return ActivityInfo(
        "wf-conn", "run", position, 1, 1, f"wf-conn:{position}", None, AttemptControl(wall_ms)
    )


@pytest.fixture
def executor() -> Iterator[ActivityExecutor]:
    made = ActivityExecutor(1, clock_ms=wall_ms)
    yield made
    made.shutdown(wait=True)


def test_one_session_serves_successive_attempts_even_after_an_error(
    executor: ActivityExecutor,
) -> None:
    definition = ActivityDefinition("exec-conn-query", _query_then)
    first = executor.submit(definition, (False,), {}, _info(1)).future.result(10)
    failed = executor.submit(definition, (True,), {}, _info(2)).future.result(10)
    after = executor.submit(definition, (False,), {}, _info(3)).future.result(10)
    assert first.ok and after.ok
    assert isinstance(failed.error, ValueError)
    assert failed.error.args[0] == first.value
    assert after.value == first.value  # the healthy connection survived the raise


def _backend_pid() -> int:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return int(cursor.fetchone()[0])


def test_a_session_the_server_ended_between_attempts_does_not_fail_the_next(
    executor: ActivityExecutor,
) -> None:
    """``pg_terminate_backend`` of an idle activity thread's session (a DBA, a
    restart, the chaos soak): the next attempt's query runs on a new session
    instead of raising ``OperationalError`` into the user's activity."""
    from django.db import connection

    if connection.vendor != "postgresql":
        pytest.skip("a server-ended session needs PostgreSQL (SQLite has no server)")
    definition = ActivityDefinition("exec-conn-pid", _backend_pid)
    first = executor.submit(definition, (), {}, _info(1)).future.result(10)
    assert first.ok, first.error
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_terminate_backend(%s)", [first.value])
        for _ in range(200):  # the backend exits a moment after the signal
            cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = %s", [first.value])
            if cursor.fetchone()[0] == 0:
                break
            time.sleep(0.01)
    after = executor.submit(definition, (), {}, _info(2)).future.result(10)
    assert after.ok, after.error
    assert after.value != first.value  # a new session, reconnected before the attempt
