"""Pickup routing (``transports.pickup_route``): one engine now, the rest later.

The invariant under test: routing only delays a pickup, never drops one --
every engine not chosen arms a fallback that fires; unknown peers, a peer
set without this engine, or a wake without a workflow id pick up at once.
"""

from __future__ import annotations

from collections import Counter

from weft_django.transports.notify.pickup_route import GATE_IDS, PickupRoute, chosen


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Conn:
    """A listener connection that answers the peers query."""

    def __init__(self, me: int, peers: list[int]) -> None:
        self.me, self.peers = me, peers
        self.statements: list[str] = []

    def execute(self, statement: object, params: object = None) -> Conn:
        self.statements.append(str(statement))
        return self

    def fetchone(self) -> tuple[int, list[int]]:
        return self.me, self.peers


def routes(me: int, peers: list[int], clock: Clock) -> tuple[PickupRoute, list[int]]:
    fired: list[int] = []
    route = PickupRoute(lambda: fired.append(me), delay_s=0.1, refresh_s=1.0, clock=clock)
    route.refresh(Conn(me, peers), "LISTEN")
    return route, fired


def test_exactly_one_engine_picks_up_each_wake_at_once_and_the_rest_arm_a_fallback():
    clock = Clock()
    peers = [11, 22, 33, 44]
    engines = [routes(pid, peers, clock) for pid in peers]
    now_by: Counter[int] = Counter()
    for i in range(400):
        before = [len(fired) for _, fired in engines]
        for route, _ in engines:
            route.wake(f"wf-{i}")
        immediate = [len(f) - b for (_, f), b in zip(engines, before, strict=True)]
        assert sum(immediate) == 1
        now_by[peers[immediate.index(1)]] += 1
    # Rendezvous hashing spreads the wakes over every peer.
    assert set(now_by) == set(peers) and min(now_by.values()) > 50
    # Each engine that was not chosen armed ONE fallback for the whole burst.
    for route, fired in engines:
        assert route.armed
        count = len(fired)
        assert not route.fire_due()  # not due yet
        clock.now += 0.1
        assert route.fire_due() and len(fired) == count + 1
        assert not route.fire_due() and not route.armed  # fired once
        clock.now -= 0.1


def test_the_choice_is_the_same_on_every_engine_and_moves_only_a_leaving_peers_share():
    ids = [f"wf-{i}" for i in range(500)]
    before = {w: chosen(w, (1, 2, 3, 4)) for w in ids}
    after = {w: chosen(w, (1, 2, 4)) for w in ids}
    moved = [w for w in ids if before[w] != after[w]]
    assert moved and all(before[w] == 3 for w in moved)


def test_unknown_or_inconsistent_peers_pick_up_at_once():
    clock = Clock()
    fired: list[str] = []
    route = PickupRoute(lambda: fired.append("x"), clock=clock)
    route.wake("wf-a")  # no refresh yet
    route.refresh(Conn(5, [6, 7]), None)  # this engine not among the peers
    route.wake("wf-b")
    route.refresh(Conn(5, [5]), None)  # alone
    route.wake("wf-c")
    route.refresh(Conn(5, [5, 6, 7]), None)
    route.wake("")  # no workflow id
    assert fired == ["x"] * 4 and not route.armed


def test_a_failed_peer_read_falls_back_to_picking_up_at_once():
    class Broken(Conn):
        def execute(self, statement: object, params: object = None) -> Conn:
            raise RuntimeError("no pg_stat_activity")

    clock = Clock()
    fired: list[str] = []
    route = PickupRoute(lambda: fired.append("x"), clock=clock)
    route.refresh(Conn(1, [1, 2, 3]), None)
    assert route.me == 1
    route.refresh(Broken(1, []), None)
    assert route.me is None
    for i in range(10):
        route.wake(f"wf-{i}")
    assert len(fired) == 10


def test_the_listener_waits_no_longer_than_the_fallback_or_the_refresh():
    clock = Clock()
    route, _ = routes(1, [1, 2], clock)
    assert route.timeout(5.0) == 1.0  # the next refresh
    not_mine = next(f"wf-{i}" for i in range(100) if chosen(f"wf-{i}", (1, 2)) == 2)
    route.wake(not_mine)
    assert abs(route.timeout(5.0) - 0.1) < 1e-6
    clock.now += 0.25
    assert route.timeout(5.0) == 0.0 and route.fire_due()
    clock.now += 1.0
    assert route.refresh_due() and route.timeout(5.0) == 0.0


def test_a_fallback_whose_runs_were_all_taken_does_not_pick_up():
    clock = Clock()
    asked: list[list[str]] = []
    pending: set[str] = set()

    def gate(ids: list[str]) -> bool:
        asked.append(ids)
        return bool(pending & set(ids))

    fired: list[int] = []
    route = PickupRoute(lambda: fired.append(1), delay_s=0.1, clock=clock, gate=gate)
    route.refresh(Conn(1, [1, 2]), None)
    others = [w for w in (f"wf-{i}" for i in range(100)) if chosen(w, (1, 2)) == 2][:3]
    for w in others:
        route.wake(w)
    clock.now += 0.1
    # The chosen engine took them all: the gate is asked about exactly them, no pickup.
    assert not route.fire_due() and fired == [] and asked == [sorted(others)]
    assert not route.armed
    # One of them still pending (the chosen engine is full): the fallback picks up.
    route.wake(others[0])
    pending.add(others[0])
    clock.now += 0.1
    assert route.fire_due() and fired == [1] and asked[-1] == [others[0]]


def test_a_failed_gate_or_too_many_ids_picks_up_unasked():
    clock = Clock()
    asked: list[int] = []

    def broken(ids: list[str]) -> bool:
        asked.append(len(ids))
        raise RuntimeError("connection lost")

    fired: list[int] = []
    route = PickupRoute(lambda: fired.append(1), delay_s=0.1, clock=clock, gate=broken)
    route.refresh(Conn(1, [1, 2]), None)
    others = [w for w in (f"wf-{i}" for i in range(5000)) if chosen(w, (1, 2)) == 2]
    route.wake(others[0])
    clock.now += 0.1
    assert route.fire_due() and fired == [1] and asked == [1]  # the gate failed: picked up
    assert len(others) > GATE_IDS
    for w in others:
        route.wake(w)
    clock.now += 0.1
    assert route.fire_due() and fired == [1, 1] and asked == [1]  # too many: not asked
    # The next fallback asks again.
    route.wake(others[0])
    clock.now += 0.1
    assert route.fire_due() and asked == [1, 1]
