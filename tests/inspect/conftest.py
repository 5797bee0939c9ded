"""Fixtures of the inspection tests: a populated store and helpers.

``populated`` drives real runs with ``WorkflowTestEnvironment`` (fake clock,
manual engine) so the journal, timers and claim events the admin shows are
the ones the engine wrote, not hand-made rows.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest

import tests.inspect.workflows  # noqa: F401  (registers the workflows)
from weft_django import client
from weft_django.testing import WorkflowTestEnvironment


@dataclass
class Populated:
    env: WorkflowTestEnvironment
    sleeper: str = "insp-sleep-1"
    waiter: str = "insp-wait-1"
    failing: str = "insp-fail-1"
    done: str = "insp-done-1"
    idempotency_key: str = "insp-key-1"

    @property
    def engine_id(self) -> str:
        return self.env.engine.engine_id


@pytest.fixture
def populated(transactional_db: None) -> Iterator[Populated]:
    env = WorkflowTestEnvironment()
    data = Populated(env)
    try:
        client.start(
            "inspect-sleeper",
            {"n": 1},
            workflow_id=data.sleeper,
            idempotency_key=data.idempotency_key,
        )
        client.start("inspect-waiter", {"n": 2}, workflow_id=data.waiter)
        client.start("inspect-failing", {"n": 3}, workflow_id=data.failing)
        client.start("inspect-quick", {"n": 4}, workflow_id=data.done)
        env.run_until_idle()
        env.engine.heartbeat()
        yield data
    finally:
        env.close()
