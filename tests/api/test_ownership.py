"""Ownership, claim-events, claims, engines and metrics endpoints."""

from __future__ import annotations

from typing import Any

import pytest

from tests.api.conftest import url
from weft_django.inspection import iso
from weft_django.kernel.clock import wall_ms
from weft_django.models import EngineRecord, WorkflowClaim
from weft_django.ownership.metrics import CLAIM_ATTEMPT_OUTCOMES

pytestmark = pytest.mark.django_db(transaction=True)


def _start_and_park(api: Any, weft_env: Any, workflow_id: str) -> None:
    response = api.post(
        url("workflows/"), {"name": "api-signal", "workflow_id": workflow_id}, format="json"
    )
    assert response.status_code == 201, response.json()
    weft_env.run_until_idle()


def test_ownership_is_client_ownership_status(api: Any, weft_env: Any) -> None:
    from weft_django import client

    _start_and_park(api, weft_env, "own-1")
    response = api.get(url("workflows/own-1/ownership/"))
    assert response.status_code == 200
    body = response.json()
    status = client.ownership_status("own-1")
    holder = status["holder"]
    # Instants as ISO 8601; the engine-clock ms under the documented *_ms names.
    assert body["holder"] == {
        "engine_id": holder["engine_id"],
        "epoch": holder["epoch"],
        "expires_at": iso(holder["expires_at"]),
        "claimed_at": iso(holder["claimed_at"]),
        "expires_at_ms": holder["expires_at"],
        "claimed_at_ms": holder["claimed_at"],
    }
    assert {**body, "holder": None} == {**status, "holder": None}
    assert body["holder"]["engine_id"] == weft_env.engine.engine_id
    assert body["status"] == "parked" and body["epoch"] == body["holder"]["epoch"]


def test_claim_events_timeline(api: Any, weft_env: Any) -> None:
    _start_and_park(api, weft_env, "ce-1")
    api.post(url("workflows/ce-1/cancel/"), {"reason": "stop"}, format="json")
    response = api.get(url("workflows/ce-1/claim-events/"))
    assert response.status_code == 200
    events = response.json()["results"]
    assert [e["kind"] for e in events] == ["acquire", "rotate"]
    assert events[0]["engine_id"] == weft_env.engine.engine_id
    assert events[1]["epoch"] == events[0]["epoch"] + 1
    assert events[1]["previous_engine_id"] == weft_env.engine.engine_id
    paged = api.get(url("workflows/ce-1/claim-events/"), {"page_size": 1}).json()
    assert paged["count"] == 2 and len(paged["results"]) == 1


def test_claims_filters_by_engine_and_expiry(api: Any) -> None:
    WorkflowClaim.objects.all().delete()  # exact listings below: start from nothing
    now = wall_ms()
    WorkflowClaim.objects.create(
        workflow_id="live", epoch=3, engine_id="e-1", claimed_at=now, expires_at=now + 30_000
    )
    WorkflowClaim.objects.create(
        workflow_id="stale",
        epoch=2,
        engine_id="e-2",
        claimed_at=now - 90_000,
        expires_at=now - 60_000,
    )
    WorkflowClaim.objects.create(workflow_id="released", epoch=5)

    everything = api.get(url("claims/")).json()
    states = {c["workflow_id"]: c["state"] for c in everything["results"]}
    assert states == {"live": "live", "stale": "expired", "released": "released"}
    live = next(c for c in everything["results"] if c["workflow_id"] == "live")
    assert 0 < live["expires_in_ms"] <= 30_000

    by_engine = api.get(url("claims/"), {"engine": "e-1"}).json()
    assert [c["workflow_id"] for c in by_engine["results"]] == ["live"]
    expired = api.get(url("claims/"), {"expired": "true"}).json()
    assert [c["workflow_id"] for c in expired["results"]] == ["stale"]
    not_expired = api.get(url("claims/"), {"expired": "false"}).json()
    assert [c["workflow_id"] for c in not_expired["results"]] == ["live"]
    bad = api.get(url("claims/"), {"expired": "maybe"})
    assert bad.status_code == 400 and "expired" in bad.json()["errors"]


def test_engines_lists_records_with_claims_held(api: Any, weft_env: Any) -> None:
    _start_and_park(api, weft_env, "eng-1")
    _start_and_park(api, weft_env, "eng-2")
    weft_env.engine.run_maintenance()  # heartbeat: counters into EngineRecord.metrics
    response = api.get(url("engines/"))
    assert response.status_code == 200
    rows = {e["engine_id"]: e for e in response.json()["results"]}
    mine = rows[weft_env.engine.engine_id]
    assert mine["claims_held"] == 2
    assert mine["stopped_at"] is None
    assert set(mine["metrics"]["attempts"]) == set(CLAIM_ATTEMPT_OUTCOMES)


def test_metrics_sums_every_engine(api: Any) -> None:
    EngineRecord.objects.all().delete()  # exact sums below: start from nothing
    WorkflowClaim.objects.all().delete()
    now = wall_ms()

    def record(engine_id: str, acquired: int, active: int, stopped: bool) -> None:
        EngineRecord.objects.create(
            engine_id=engine_id,
            mode="workflow-lease",
            started_at=now - 1000,
            heartbeat_at=now,
            stopped_at=now if stopped else None,
            metrics={
                "version": 1,
                "attempts": {"acquired": acquired, "takeover": 1},
                "active_claims": active,
                "renewal_failures": 1,
                "abandoned_activity_threads": 3,
                "workflow_cache_hits": 4,
                "workflow_cache_misses": 1,
                "wakes": [
                    {"kind": "signal", "decision": "proceed", "transport": "polling", "count": 2}
                ],
            },
        )

    record("m-1", 5, 2, stopped=False)
    record("m-2", 7, 9, stopped=True)
    EngineRecord.objects.create(
        engine_id="m-garbage",
        mode="workflow-lease",
        started_at=now,
        heartbeat_at=now,
        metrics={"attempts": {"acquired": "lots", "bogus": 3}, "active_claims": -1},
    )
    WorkflowClaim.objects.create(
        workflow_id="held", epoch=1, engine_id="m-1", claimed_at=now, expires_at=now + 30_000
    )
    response = api.get(url("metrics/"))
    assert response.status_code == 200
    body = response.json()
    assert body["attempts"] == {
        "acquired": 12,
        "takeover": 2,
        "lost_race": 0,
        "deposed": 0,
        "rotated": 0,
        "backoff_skipped": 0,
    }
    assert body["active_claims"] == 2  # the stopped engine's gauge does not count
    assert body["renewal_failures"] == 2
    assert body["abandoned_activity_threads"] == 6  # a counter: stopped engines count
    assert (body["workflow_cache_hits"], body["workflow_cache_misses"]) == (8, 2)
    assert body["wakes"] == [
        {"kind": "signal", "decision": "proceed", "transport": "polling", "count": 4}
    ]
    assert body["engines"] == {"total": 3, "alive": 2, "stopped": 1}
    assert body["claims"] == {"total": 1, "held": 1, "expired": 0}
    assert set(body["runs_by_status"]) >= {"pending", "completed", "timed_out"}
    assert body["due_timers"] == 0 and body["oldest_due_timer_lag_ms"] is None


def test_ownership_judges_expiry_by_claim_state(api: Any) -> None:
    """``ownership_status`` and the claims listing agree: a claim row with only
    ``claimed_at`` set (half-null: the codec refuses it) is expired -- another
    engine takes it over -- and has no holder; a released row is not expired."""
    from weft_django import client
    from weft_django.inspection.rules import claim_state

    half = WorkflowClaim.objects.create(workflow_id="own-half", epoch=2, claimed_at=wall_ms())
    WorkflowClaim.objects.create(workflow_id="own-free", epoch=2)
    assert claim_state(half, wall_ms()) == "expired"

    body = api.get(url("workflows/own-half/ownership/")).json()
    assert body == client.ownership_status("own-half")
    assert body["expired"] is True and body["holder"] is None and body["epoch"] == 2
    free = api.get(url("workflows/own-free/ownership/")).json()
    assert free["expired"] is False and free["holder"] is None
