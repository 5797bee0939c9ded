"""A Celery node claims no more pending runs than its pool can drive soon.

Invariant protected: a node's main process picks up pending runs for its
pool; it may hold at most twice the pool's processes in turns it owes
(``running`` runs under its claims), like a standalone engine's threads. A
node that claimed without that bound held 250 runs on a two-process pool in
the chaos soak, renewing their claims while their wakes queued a minute deep
and standalone engines idled.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from weft_django.conf import get_settings
from weft_django.models import WorkflowClaim, WorkflowRun
from weft_django.transports.celery.node import CeleryNodeScheduler

pytestmark = pytest.mark.django_db

NOW = 5_000_000


def _scheduler(concurrency: int) -> CeleryNodeScheduler:
    ident: Any = SimpleNamespace(
        engine_id="node-a", node_name="n@h", pool="prefork", concurrency=concurrency
    )
    scheduler = CeleryNodeScheduler(ident, SimpleNamespace())
    scheduler.engine = SimpleNamespace(  # type: ignore[assignment]
        settings=get_settings(), now_ms=lambda: NOW
    )
    return scheduler


def _hold(engine_id: str, status: str, n: int, prefix: str, **fields: Any) -> None:
    for i in range(n):
        workflow_id = f"{prefix}-{i}"
        WorkflowRun.objects.create(workflow_id=workflow_id, name="n", status=status, **fields)
        WorkflowClaim.objects.create(
            workflow_id=workflow_id, epoch=1, engine_id=engine_id, expires_at=10**12
        )


def test_room_is_twice_the_pool_less_the_turns_owed() -> None:
    scheduler = _scheduler(concurrency=2)
    assert scheduler.pickup_capacity(50) == 4
    _hold("node-a", "running", 3, "owed")
    _hold("node-a", "parked", 5, "parked")  # waiting on the world: owes no turn
    _hold("node-b", "running", 7, "other")  # another engine's turns
    assert scheduler.pickup_capacity(50) == 1
    assert scheduler.pickup_capacity(0) == 0
    _hold("node-a", "running", 2, "more")
    assert scheduler.pickup_capacity(50) == 0  # never negative


def test_a_pool_of_unknown_size_counts_as_one() -> None:
    scheduler = _scheduler(concurrency=0)
    assert scheduler.pickup_capacity(50) == 2


def test_parked_runs_with_a_wake_or_a_due_timer_are_owed_turns() -> None:
    """A signal, a child's completion or a cancel request (``wake_seq`` past
    ``parked_seq``) and a due timer each need a turn from this node's pool."""
    scheduler = _scheduler(concurrency=3)
    assert scheduler.pickup_capacity(50) == 6
    _hold("node-a", "parked", 2, "woken", wake_seq=3, parked_seq=2)
    _hold("node-a", "parked", 1, "due", wake_at=NOW)
    _hold("node-a", "parked", 4, "later", wake_at=NOW + 1)  # not yet due
    assert scheduler.pickup_capacity(50) == 3
    assert scheduler.reclaim_capacity(50) == 3  # takeovers take the same room
    assert scheduler.reclaim_capacity(2) == 2
