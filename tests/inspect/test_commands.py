"""``weft_status``, ``weft_force_release`` and ``weft_reset_mode`` (SPEC §5)."""

from __future__ import annotations

import io
import json
import subprocess
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from tests.inspect.conftest import Populated
from tests.support import REPO_ROOT, child_env, python
from weft_django import client
from weft_django.engine import Engine
from weft_django.kernel.clock import wall_ms
from weft_django.models import (
    ClaimEvent,
    EngineRecord,
    OwnershipModeMarker,
    Timer,
    WorkflowClaim,
    WorkflowRun,
)

pytestmark = pytest.mark.django_db(transaction=True)


def run(*args: str, **options: Any) -> str:
    out = io.StringIO()
    call_command(*args, stdout=out, stderr=io.StringIO(), **options)
    return out.getvalue()


@pytest.fixture
def live_engine() -> Any:
    """An engine on the wall clock, heartbeating now: alive for the commands."""
    engine = Engine(engine_id="live-engine", background_tasks="manual").boot()
    try:
        yield engine
    finally:
        engine.dispose(grace=0)


def test_status_json_has_the_numbers(populated: Populated) -> None:
    data = json.loads(run("weft_status", "--json"))
    assert data["runs_by_status"] == {
        "pending": 0,
        "running": 0,
        "parked": 2,
        "suspended": 0,
        "completed": 1,
        "failed": 1,
        "cancelled": 0,
        "timed_out": 0,
        "terminated": 0,
    }
    assert data["claims_per_engine"] == {populated.engine_id: 2}
    assert data["claims_held"] == 2
    # The test environment's fake clock is years behind the wall clock: its
    # engine is not alive, its claims are expired and its sleep timer is due.
    assert data["engines_alive"] == 0 and data["engines_total"] == 1
    assert data["expired_claims"] == 2
    assert data["due_timers"] == 1 and data["due_timer_lag_s"] > 60
    [engine] = data["engines"]
    assert engine["engine_id"] == populated.engine_id and engine["alive"] is False
    assert engine["claims_held"] == 2
    assert engine["counters"]["attempts"]["acquired"] == 4
    assert data["metrics"]["attempts"]["acquired"] == 4
    # Each run's first turn looked in the (empty) workflow cache: 4 misses.
    assert engine["counters"]["workflow_cache_misses"] == 4
    assert data["metrics"]["workflow_cache_hits"] == 0
    assert data["marker"]["mode"] == "workflow-lease"
    assert "check" not in data


def test_status_text(populated: Populated) -> None:
    text = run("weft_status")
    assert populated.engine_id in text
    assert "expired claims: 2" in text
    assert "parked 2" in text
    assert "engines: 0 alive of 1 recorded" in text
    assert "workflow cache (all engines): hits 0, misses 4, hit rate 0.0%" in text


def test_check_fails_with_no_engine_alive(populated: Populated) -> None:
    with pytest.raises(CommandError, match="no engine is alive") as excinfo:
        run("weft_status", "--check", "--max-lag", "1e9")
    assert excinfo.value.returncode == 1
    with pytest.raises(CommandError):
        run("weft_status", "--check", "--json")


def test_check_passes_with_a_live_engine(live_engine: Engine) -> None:
    text = run("weft_status", "--check")
    assert "weft check ok" in text
    data = json.loads(run("weft_status", "--check", "--json"))
    assert data["check"] == {"ok": True, "max_lag_s": 60.0, "problems": []}
    assert data["engines_alive"] == 1


def test_check_fails_when_timers_lag(live_engine: Engine) -> None:
    handle = client.start("inspect-waiter", {"n": 1}, workflow_id="lagging-1")
    live_engine.run_until_idle()
    run_row = WorkflowRun.objects.get(pk=handle.run_id)
    assert run_row.status == "parked"
    Timer.objects.create(run=run_row, kind="sleep", fire_at=wall_ms() - 120_000)
    with pytest.raises(CommandError, match="due timers lag"):
        run("weft_status", "--check")
    assert "weft check ok" in run("weft_status", "--check", "--max-lag", "600")


@pytest.mark.processes
def test_check_exit_status_from_the_command_line(populated: Populated) -> None:
    """What a liveness probe sees: the process's exit status."""
    result = subprocess.run(
        [python(), "manage.py", "weft_status", "--check"],
        cwd=REPO_ROOT,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 1, result.stderr
    assert "no engine is alive" in result.stderr


def test_force_release_rotates_and_prints_the_new_epoch(populated: Populated) -> None:
    before = WorkflowClaim.objects.get(pk=populated.waiter)
    assert before.engine_id == populated.engine_id
    out = run("weft_force_release", populated.waiter)
    assert out.strip() == str(before.epoch + 1)
    after = WorkflowClaim.objects.get(pk=populated.waiter)
    assert after.epoch == before.epoch + 1 and after.engine_id is None
    event = ClaimEvent.objects.filter(workflow_id=populated.waiter).order_by("-id").first()
    assert event is not None and (event.kind, event.epoch) == ("force_release", after.epoch)
    assert WorkflowRun.objects.get(workflow_id=populated.waiter).status == "parked"


def test_force_release_of_an_unknown_id_is_refused(populated: Populated) -> None:
    with pytest.raises(CommandError, match="no claim and no run"):
        run("weft_force_release", "nobody-ever")
    assert not WorkflowClaim.objects.filter(pk="nobody-ever").exists()


def test_reset_mode_is_refused_while_an_engine_is_alive(live_engine: Engine) -> None:
    assert OwnershipModeMarker.objects.exists()
    with pytest.raises(CommandError, match="engines are alive") as excinfo:
        run("weft_reset_mode", "--noinput")
    assert "live-engine" in str(excinfo.value)
    assert OwnershipModeMarker.objects.exists()


def test_reset_mode_deletes_the_marker_once_engines_are_gone(live_engine: Engine) -> None:
    live_engine.dispose(grace=0)
    assert EngineRecord.objects.get(pk="live-engine").stopped_at is not None
    out = run("weft_reset_mode", "--noinput")
    assert "deleted the ownership mode marker" in out
    assert not OwnershipModeMarker.objects.exists()
    assert "nothing to reset" in run("weft_reset_mode", "--noinput")


def test_reset_mode_counts_a_silent_engine_within_three_ttls(transactional_db: None) -> None:
    from weft_django.conf import get_settings

    ttl = get_settings().claim_ttl_ms
    now = wall_ms()
    OwnershipModeMarker.objects.create(mode="workflow-lease", established_at=now)
    # Silent for two TTLs (well past "alive" for weft_status), never stopped.
    EngineRecord.objects.create(
        engine_id="silent", mode="workflow-lease", started_at=now, heartbeat_at=now - 2 * ttl
    )
    with pytest.raises(CommandError, match="silent"):
        run("weft_reset_mode", "--noinput")
    EngineRecord.objects.filter(pk="silent").update(heartbeat_at=now - 4 * ttl)
    run("weft_reset_mode", "--noinput")
    assert not OwnershipModeMarker.objects.exists()
