"""The reclaim scan takes over runs that need a turn only into the scheduler's room.

Invariant protected: an engine that claims at once and drives later (a
Celery node: the turn waits in its queue) never takes over more runs that
need a turn now than it has room to drive (``reclaim_capacity``); the rest
stay takeable for an engine with room. A parked run with nothing due takes
no room: holding its claim costs no turn. A run that no engine with room
took by the next pass is taken anyway. Without the bound, a backlogged
two-process node in the chaos soak kept taking over cancelled runs whose
cleanups then sat a minute behind its queue until their grace ran out.
"""

from __future__ import annotations

import pytest

from tests.e2e.helpers import latest
from weft_django import activity, client, workflow
from weft_django.engine import Engine
from weft_django.models import WorkflowClaim

pytestmark = [pytest.mark.django_db(transaction=True)]


@activity()
def reclaim_room_note(tag: str) -> str:
    return tag


@workflow(name="reclaim-room-wait")
def reclaim_room_wait(ctx, data):
    yield ctx.run(reclaim_room_note, data)
    got = yield ctx.wait_for_signal("go")
    return got


def _holders(prefix: str) -> dict[str, str | None]:
    return dict(
        WorkflowClaim.objects.filter(workflow_id__startswith=prefix).values_list(
            "workflow_id", "engine_id"
        )
    )


def test_a_bounded_scheduler_takes_over_due_runs_only_into_its_room(clock):
    dead = Engine(clock=clock, engine_id="dead", background_tasks="manual").boot()
    taker = Engine(clock=clock, engine_id="taker", background_tasks="manual").boot()
    try:
        for name in ("idle", "woken-1", "woken-2", "woken-3"):
            client.start("reclaim-room-wait", name, workflow_id=f"rr-{name}")
        dead.run_until_idle()  # all four parked, waiting for "go", claimed by "dead"
        assert set(_holders("rr-").values()) == {"dead"}
        for name in ("woken-1", "woken-2", "woken-3"):
            client.signal(f"rr-{name}", "go", name)  # each now owes a turn
        clock.advance(120_000)  # "dead" stopped renewing: every claim is takeable
        # A scheduler that claims ahead of its turns, with room for one.
        taker.scheduler.claims_ahead_of_turns = True  # type: ignore[misc]
        taker.scheduler.reclaim_capacity = lambda most: min(most, 1)  # type: ignore[method-assign]
        taker.maintenance.reclaim()
        holders = _holders("rr-")
        assert holders["rr-idle"] == "taker", "a parked run with nothing due takes no room"
        queued = {str(run_id) for run_id, *_ in taker.scheduler._queue}
        assert str(latest("rr-idle").pk) in queued, "driven: its takeover turn resumes it"
        woken = [holders[f"rr-woken-{i}"] for i in (1, 2, 3)]
        assert woken.count("taker") == 1, woken
        # The others stay takeable: the next pass takes one more into its room ...
        taker.maintenance.reclaim()
        assert list(_holders("rr-").values()).count("taker") == 3
        # ... and a run no engine with room took by the next pass is
        # taken anyway: a late turn is better than an owner-less run.
        clock.advance(taker.settings.claim_renew_interval_ms)
        taker.maintenance.reclaim()
        assert set(_holders("rr-").values()) == {"taker"}
        taker.run_until_idle()
        assert {latest(f"rr-woken-{i}").status for i in (1, 2, 3)} == {"completed"}
        assert latest("rr-idle").status == "parked"
        client.signal("rr-idle", "go", "late")
        taker.run_until_idle()
        assert latest("rr-idle").status == "completed"
    finally:
        dead.dispose(grace=0)
        taker.dispose(grace=0)


def test_a_claim_acquired_but_not_checked_is_checked_again(clock, monkeypatch):
    """``reclaim_one`` acquires, then checks that the workflow has a run to
    drive, releasing the claim when it has none. The database going away
    between the two (a server restart in the chaos soak) left the claim held
    and renewed for nothing until the engine stopped; the next reclaim pass
    now checks it again."""
    from django.db import OperationalError

    from weft_django.engine.maintenance.passes import Maintenance
    from weft_django.models import WorkflowRun

    dead = Engine(clock=clock, engine_id="dead", background_tasks="manual").boot()
    taker = Engine(clock=clock, engine_id="taker", background_tasks="manual").boot()
    try:
        for name in ("ended", "alive"):
            client.start("reclaim-room-wait", name, workflow_id=f"rc-{name}")
        dead.run_until_idle()
        clock.advance(120_000)
        real = Maintenance.has_drivable_run

        def gone(self, workflow_id):
            raise OperationalError("server closed the connection unexpectedly")

        monkeypatch.setattr(Maintenance, "has_drivable_run", gone)
        for name in ("ended", "alive"):
            with pytest.raises(OperationalError):
                taker.maintenance.reclaim_one(f"rc-{name}")
        assert _holders("rc-") == {"rc-ended": "taker", "rc-alive": "taker"}
        # Meanwhile "rc-ended" ended elsewhere (say, a cancel's grace ran out).
        WorkflowRun.objects.filter(workflow_id="rc-ended").update(status="cancelled")
        monkeypatch.setattr(Maintenance, "has_drivable_run", real)
        taker.maintenance.reclaim()
        assert _holders("rc-") == {"rc-ended": None, "rc-alive": "taker"}
        assert taker.maintenance.unverified == set()
        assert taker.registry.current_epoch("rc-ended") is None
        assert taker.registry.current_epoch("rc-alive") is not None
    finally:
        dead.dispose(grace=0)
        taker.dispose(grace=0)


def test_a_release_cut_off_mid_statement_is_retried(clock, monkeypatch):
    """A claim acquired for a workflow with nothing to drive is released; when
    that release's statement fails (the server restarted mid-statement, seed
    102 of the chaos soak), the outcome is in doubt, so the registry keeps the
    claim tracked and the next reclaim pass releases it. Forgetting it left a
    row naming the engine that nothing renewed, released or took over."""
    from django.db import OperationalError

    from weft_django.engine.maintenance.passes import Maintenance
    from weft_django.models import WorkflowRun
    from weft_django.ownership import registry as registry_module

    dead = Engine(clock=clock, engine_id="dead", background_tasks="manual").boot()
    taker = Engine(clock=clock, engine_id="taker", background_tasks="manual").boot()
    try:
        client.start("reclaim-room-wait", "ended", workflow_id="rl-ended")
        dead.run_until_idle()
        clock.advance(120_000)
        # The scan read it as drivable; it ended before the acquire's check.
        WorkflowRun.objects.filter(workflow_id="rl-ended").update(status="cancelled")
        calls = {"release": 0}

        def cut_off(conditions, writes, *, using):
            calls["release"] += 1
            raise OperationalError("server closed the connection unexpectedly")

        def nothing_to_drive_then_cut_off(self, workflow_id):
            # The acquire has committed; the release that follows is cut off.
            monkeypatch.setattr(registry_module, "conditional_batch", cut_off)
            return False

        monkeypatch.setattr(Maintenance, "has_drivable_run", nothing_to_drive_then_cut_off)
        with pytest.raises(OperationalError):
            taker.maintenance.reclaim_one("rl-ended")
        assert calls["release"] == 1
        assert _holders("rl-") == {"rl-ended": "taker"}
        assert taker.registry.current_epoch("rl-ended") is not None, "still tracked: in doubt"
        assert taker.maintenance.unverified == {"rl-ended"}
        monkeypatch.undo()  # the database is back
        taker.maintenance.reclaim()
        assert _holders("rl-") == {"rl-ended": None}
        assert taker.registry.current_epoch("rl-ended") is None
        assert taker.maintenance.unverified == set()
    finally:
        dead.dispose(grace=0)
        taker.dispose(grace=0)
