"""Activity worker threads keep their database connection between attempts.

Why: a sync activity that queries the database must not pay a new
PostgreSQL session per attempt (10-16 ms each); the executor's workers are
persistent threads, and an attempt that raised closes a connection only if
it became unusable.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.support import db_session_id
from weft_django.clock import wall_ms
from weft_django.engine.activity_context import ActivityInfo, AttemptControl
from weft_django.engine.definitions import ActivityDefinition
from weft_django.engine.executor import ActivityExecutor

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
