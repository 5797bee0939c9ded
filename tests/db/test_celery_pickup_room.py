"""A ``weft.pickup`` message claims a pending run only into its node's room.

Invariant protected: a Celery node claims no more runs than its pool can
drive soon -- the same room (``transports.celery.room.node_room``) whether
its main process picks up or takes over, or a pool process takes a pickup
message from the shared queue. Without it, pickup messages kept a loaded
node's pool busy with new runs while the turns it owed (a cancelled run's
cleanup) waited a minute and more behind them, past their grace (the chaos
soak, issue #21).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.db.celery_pool import as_pool_process
from weft_django.kernel.clock import wall_ms
from weft_django.models import WorkflowClaim, WorkflowRun
from weft_django.transports.celery import identity as node_identity
from weft_django.transports.celery import room
from weft_django.transports.celery.tasks import run_pickup

pytestmark = pytest.mark.usefixtures("batch_db")


@pytest.fixture
def node() -> Iterator[None]:
    """This process as a pool process of a one-process node."""
    with as_pool_process("node-r", "celery@room", concurrency=1):
        yield


def _owe(n: int) -> None:
    for i in range(n):
        WorkflowRun.objects.create(workflow_id=f"owed-{i}", name="n", status="running")
        WorkflowClaim.objects.create(
            workflow_id=f"owed-{i}", epoch=1, engine_id="node-r", expires_at=10**15
        )


def test_a_node_owing_its_room_leaves_a_pickup_pending_and_re_offers_it(
    node: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    sent: list[tuple[str, dict[str, Any]]] = []
    monkeypatch.setattr(
        room, "send_pickup", lambda run_id, **options: sent.append((run_id, options)) or True
    )
    _owe(2)  # twice the pool's one process: no room
    run = WorkflowRun.objects.create(workflow_id="new-1", name="three-steps", status="pending")
    before = wall_ms()
    assert run_pickup(str(run.pk), workflow_id="new-1", due_ms=before - 5) == "no-room"
    run.refresh_from_db()
    assert run.status == "pending"
    assert not WorkflowClaim.objects.filter(pk="new-1", engine_id__isnull=False).exists()
    # Offered again shortly, with its first due time: the latency is the run's.
    [(run_id, options)] = sent
    assert run_id == str(run.pk)
    assert options["attempt"] == 1
    assert options["due_ms"] == before - 5
    assert options["workflow_id"] == "new-1"
    assert before + room.REOFFER_FIRST_MS <= options["eta_ms"] <= wall_ms() + room.REOFFER_FIRST_MS
    # Once the delay would reach half a renew interval, polling is as soon.
    sent.clear()
    assert run_pickup(str(run.pk), workflow_id="new-1", attempt=30) == "no-room"
    assert sent == []


def test_re_offers_back_off_until_polling_is_as_soon() -> None:
    delays = []
    attempt = 0
    while (delay := room.reoffer_delay_ms(attempt, 10_000)) is not None:
        delays.append(delay)
        attempt += 1
    assert delays == [250, 500, 1000, 2000, 4000]
    assert room.reoffer_delay_ms(0, 400) is None  # a renew interval this short polls as soon


def test_a_node_with_room_picks_up_and_drives(node: None) -> None:
    _owe(1)
    run = WorkflowRun.objects.create(workflow_id="new-2", name="three-steps", status="pending")
    assert run_pickup(str(run.pk), workflow_id="new-2") not in ("no-room", "busy", "lost-race")
    run.refresh_from_db()
    assert run.status != "pending"
    assert WorkflowClaim.objects.get(pk="new-2").epoch >= 1


def test_the_identity_carries_the_pool_size_across_the_fork() -> None:
    ident = node_identity.NodeIdentity("e", "n@h", "prefork", 1, concurrency=4)
    assert node_identity.NodeIdentity.from_env(ident.to_env()) == ident
    # An identity written before the field existed reads as a pool of one.
    legacy = '{"e": "e", "n": "n@h", "p": "prefork", "m": 1}'
    assert node_identity.NodeIdentity.from_env(legacy).concurrency == 1
