"""The fallback pickup of pickup routing (``transports.pickup_route``).

Two started engines in this process on PostgreSQL, polling only every
300 s: whatever picks a run up in the test came from a pickup wake. Engine
A is full (no room for a pickup), so every run routed to it waits for the
other engine's delayed fallback pickup -- which must fire: routing may
delay a pickup, never drop one. And a run routed to B is picked up by B at
once (B's fallback is not what takes it: none is armed for it). Durations
are never asserted; waits are hang protection only.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connection

from tests.support import wait_for
from weft_django import client, workflow
from weft_django.engine import Engine
from weft_django.models import ClaimEvent, WorkflowRun
from weft_django.transports.notify.pickup_route import PEERS_PATTERN, chosen

LONG_S = 300


@workflow(name="fallback-echo")
def fallback_echo(ctx: Any, data: Any) -> Any:
    return data
    yield  # pragma: no cover - makes this a generator


def _route_pids() -> list[int]:
    with connection.cursor() as cur:
        cur.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
            "AND query LIKE %s AND pid <> pg_backend_pid()",
            [PEERS_PATTERN],
        )
        return sorted(int(pid) for (pid,) in cur.fetchall())


@pytest.fixture
def engines() -> Iterator[tuple[Engine, Engine]]:
    if connection.vendor != "postgresql":
        pytest.skip("pickup wakes are PostgreSQL NOTIFYs")
    started = []
    try:
        for name in ("fb-a", "fb-b"):
            engine = Engine(name, poll_interval=LONG_S, claim_renew_interval=LONG_S, claim_ttl=900)
            started.append(engine.start())
        for engine in started:
            assert engine._tasks.first_pass.wait(30)
        yield started[0], started[1]
    finally:
        for engine in started:
            engine.dispose(grace=5)


def _routes(engine: Engine) -> Any:
    (listening,) = engine._listening
    return listening.route


@pytest.mark.django_db(transaction=True)
def test_runs_routed_to_a_full_engine_are_picked_up_by_the_others_fallback(
    engines: tuple[Engine, Engine], monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = engines
    route_a, route_b = _routes(a), _routes(b)
    wait_for(
        "both engines to know both peers",
        lambda: route_a.peers == route_b.peers and len(route_a.peers) == 2,
    )
    peers = route_a.peers
    assert _route_pids() == list(peers)
    monkeypatch.setattr(a.scheduler, "pickup_capacity", lambda most: 0)  # A is full
    to_a = [w for w in (f"fb-{i}" for i in range(200)) if chosen(w, peers) == route_a.me][:5]
    fired = []
    real_fire = route_b.fire_due
    monkeypatch.setattr(route_b, "fire_due", lambda: real_fire() and not fired.append(1))
    handles = [client.start("fallback-echo", w, workflow_id=w) for w in to_a]
    for handle in handles:
        assert handle.result(timeout=30) == handle.workflow_id
    assert fired, "B's fallback pickup fired"
    acquirers = set(
        ClaimEvent.objects.filter(workflow_id__in=to_a, kind="acquire").values_list(
            "engine_id", flat=True
        )
    )
    assert acquirers == {"fb-b"}
    # A run routed to B: B picks it up on the wake itself.
    fired.clear()
    to_b = next(w for w in (f"fb-b-{i}" for i in range(200)) if chosen(w, peers) == route_b.me)
    assert client.start("fallback-echo", 1, workflow_id=to_b).result(timeout=30) == 1
    assert WorkflowRun.objects.get(workflow_id=to_b).status == "completed"
    assert not route_b.armed


@pytest.mark.django_db(transaction=True)
def test_a_fallback_whose_runs_were_taken_runs_no_pickup_and_keeps_the_engine_a_peer(
    engines: tuple[Engine, Engine], monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = engines
    route_a, route_b = _routes(a), _routes(b)
    wait_for(
        "both engines to know both peers",
        lambda: route_a.peers == route_b.peers and len(route_a.peers) == 2,
    )
    peers = route_a.peers
    asked: list[list[str]] = []
    real_gate = route_b.gate
    assert real_gate is not None
    monkeypatch.setattr(route_b, "gate", lambda ids: asked.append(ids) or real_gate(ids))
    pickups: list[int] = []
    real_pickup = route_b.on_pickup
    monkeypatch.setattr(route_b, "on_pickup", lambda: pickups.append(1) or real_pickup())
    # B's clock stands still until every run is done: its fallback cannot fall due before.
    now = [route_b.clock()]
    monkeypatch.setattr(route_b, "clock", lambda: now[0])
    to_a = [w for w in (f"fg-{i}" for i in range(200)) if chosen(w, peers) == route_a.me][:3]
    for w in to_a:
        assert client.start("fallback-echo", w, workflow_id=w).result(timeout=30) == w
    wait_for("B to arm its fallback", lambda: route_b.armed)
    now[0] += 1.0
    wait_for("B's fallback to fall due and ask its gate", lambda: asked and not route_b.armed)
    # A took them all: B's gate saw none pending, and B ran no pickup for them.
    assert sorted({w for ids in asked for w in ids}) == sorted(to_a)
    assert pickups == []
    assert set(
        ClaimEvent.objects.filter(workflow_id__in=to_a, kind="acquire").values_list(
            "engine_id", flat=True
        )
    ) == {"fb-a"}
    # The gate's read carries the routing mark: B's session is still among the peers.
    assert _route_pids() == list(peers)
