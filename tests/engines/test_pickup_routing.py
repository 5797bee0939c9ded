"""Pickup routing with real engines (``transports.pickup_route``; issue #15).

A pickup wake goes at once to ONE engine (the rendezvous hash of the
workflow id over the live engines' wake sessions); the others only arm a
delayed fallback pickup. The invariant checked here with real
``weft_worker`` processes on PostgreSQL: a run routed to an engine that
cannot pick it up is still picked up by another one -- here the chosen
engine is SIGSTOPped, so its session lives on and it stays among the peers
every other engine routes to. Durations are never asserted; waits are hang
protection only.
"""

from __future__ import annotations

import signal

import pytest
from django.db import connection

from tests.engines.harness import Worker, kill_all, wait_for
from weft_django import client
from weft_django.models import ClaimEvent, WorkflowRun
from weft_django.transports.notify.pickup_route import PEERS_PATTERN, chosen

pytestmark = [pytest.mark.processes]

ROUTED = 6


def _route_pids() -> dict[str, int]:
    """engine id (``application_name``) -> the backend pid of its routed wake session."""
    with connection.cursor() as cur:
        cur.execute(
            "SELECT application_name, pid FROM pg_stat_activity "
            "WHERE datname = current_database() AND query LIKE %s AND pid <> pg_backend_pid()",
            [PEERS_PATTERN],
        )
        return {str(name): int(pid) for name, pid in cur.fetchall()}


@pytest.mark.django_db(transaction=True)
def test_a_run_routed_to_a_stalled_engine_is_picked_up_by_another(tmp_path):
    assert connection.vendor == "postgresql"
    workers: list[Worker] = []
    try:
        a = Worker("route-a", tmp_path)
        b = Worker("route-b", tmp_path)
        workers += [a, b]
        a.wait_booted()
        b.wait_booted()
        pids = wait_for(
            "both engines' routed wake sessions",
            lambda: (lambda p: p if set(p) == {"route-a", "route-b"} else None)(_route_pids()),
            a,
            b,
        )
        peers = tuple(sorted(pids.values()))
        # Before the stall, a run routed to A is A's to pick up.
        first = next(
            f"route-{i}" for i in range(1000) if chosen(f"route-{i}", peers) == pids["route-a"]
        )
        client.start("three-steps", {"id": first}, workflow_id=first)
        assert client.get_handle(first).result(timeout=30)
        a.signal_group(signal.SIGSTOP)
        # A's session lives on: it is still a peer, and still chosen for these.
        routed_to_a = [
            f"stalled-{i}" for i in range(1000) if chosen(f"stalled-{i}", peers) == pids["route-a"]
        ][:ROUTED]
        assert _route_pids() == pids
        for wid in routed_to_a:
            client.start("three-steps", {"id": wid}, workflow_id=wid)
        completed = WorkflowRun.objects.filter(workflow_id__in=routed_to_a, status="completed")
        wait_for(
            "B to pick up and finish every run routed to the stalled A",
            lambda: completed.count() == ROUTED,
            b,
        )
        acquirers = set(
            ClaimEvent.objects.filter(workflow_id__in=routed_to_a, kind="acquire").values_list(
                "engine_id", flat=True
            )
        )
        assert acquirers == {"route-b"}
        assert _route_pids() == pids  # A was a peer throughout
    finally:
        for worker in workers:
            if worker.alive():
                worker.signal_group(signal.SIGCONT)
        kill_all(workers)
