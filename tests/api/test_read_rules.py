"""The API, the admin and the read model judge "alive", "expired" and "due" alike.

Each case is one where the API used to disagree with the admin, ``weft_status``
and ``/metrics`` (the API had its own copies of the rules): an engine that
heartbeated between 3 × CLAIM_RENEW_INTERVAL and CLAIM_TTL ago, corrupt
holders (``engine_id=""``, ``epoch < 1``, only ``claimed_at`` set), and due
timers of runs nobody drives. Now they all read ``weft_django.models.querysets``.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from tests.api.conftest import url
from weft_django.conf import get_settings
from weft_django.inspection import claim_state, cluster_counters, cluster_status
from weft_django.kernel.clock import wall_ms
from weft_django.models import EngineRecord, Timer, WorkflowClaim, WorkflowRun

pytestmark = pytest.mark.django_db


def _results(response: Any) -> list[dict[str, Any]]:
    assert response.status_code == 200, response.content
    return response.json()["results"]


def _admin_rows(admin_client: Client, model: str, **params: str) -> set[str]:
    response = admin_client.get(reverse(f"admin:weft_{model}_changelist"), params)
    assert response.status_code == 200
    return {str(row.pk) for row in response.context["cl"].result_list}


def _engine(engine_id: str, heartbeat_age_ms: int) -> EngineRecord:
    now = wall_ms()
    return EngineRecord.objects.create(
        engine_id=engine_id,
        mode="workflow-lease",
        started_at=now - heartbeat_age_ms,
        heartbeat_at=now - heartbeat_age_ms,
    )


def test_an_engine_silent_past_three_renew_intervals_is_not_alive_anywhere(
    api: APIClient, admin_client: Client
) -> None:
    settings = get_settings()
    window = 3 * settings.claim_renew_interval_ms
    assert window < settings.claim_ttl_ms  # the gap the API used to call "alive"
    _engine("silent", (window + settings.claim_ttl_ms) // 2)
    _engine("fresh", window // 3)

    alive = {row["engine_id"]: row["alive"] for row in _results(api.get(url("engines/")))}
    assert alive == {"silent": False, "fresh": True}
    assert api.get(url("metrics/")).json()["engines"] == {"total": 2, "alive": 1, "stopped": 0}
    assert _admin_rows(admin_client, "enginerecord", alive="yes") == {"fresh"}
    assert [e.engine_id for e in cluster_status().alive_engines] == ["fresh"]


@pytest.mark.parametrize(
    "holder",
    [
        {"engine_id": "", "epoch": 3},  # an empty engine id
        {"engine_id": "e-1", "epoch": 0},  # an epoch below 1
    ],
    ids=["empty-engine-id", "epoch-below-1"],
)
def test_a_corrupt_holder_is_expired_in_the_api_as_in_the_admin(
    api: APIClient, admin_client: Client, holder: dict[str, Any]
) -> None:
    now = wall_ms()
    claim = WorkflowClaim.objects.create(
        workflow_id="corrupt", expires_at=now + 60_000, claimed_at=now, **holder
    )
    WorkflowClaim.objects.create(
        workflow_id="healthy", engine_id="e-2", epoch=1, expires_at=now + 60_000, claimed_at=now
    )

    assert claim_state(claim, now) == "expired"
    states = {row["workflow_id"]: row["state"] for row in _results(api.get(url("claims/")))}
    assert states == {"corrupt": "expired", "healthy": "live"}
    expired = [row["workflow_id"] for row in _results(api.get(url("claims/?expired=true")))]
    assert expired == ["corrupt"]
    live = [row["workflow_id"] for row in _results(api.get(url("claims/?expired=false")))]
    assert live == ["healthy"]
    assert api.get(url("metrics/")).json()["claims"]["expired"] == 1
    assert _admin_rows(admin_client, "workflowclaim", state="expired") == {"corrupt"}
    assert cluster_status().expired_claims == 1


def test_a_claim_row_with_only_claimed_at_is_expired_not_released(
    api: APIClient, admin_client: Client
) -> None:
    claim = WorkflowClaim.objects.create(workflow_id="half", epoch=2, claimed_at=wall_ms())
    WorkflowClaim.objects.create(workflow_id="free", epoch=2)

    assert claim_state(claim, wall_ms()) == "expired"
    states = {row["workflow_id"]: row["state"] for row in _results(api.get(url("claims/")))}
    assert states == {"half": "expired", "free": "released"}
    assert [r["workflow_id"] for r in _results(api.get(url("claims/?expired=true")))] == ["half"]
    assert _admin_rows(admin_client, "workflowclaim", state="expired") == {"half"}
    assert _admin_rows(admin_client, "workflowclaim", state="released") == {"free"}


def test_due_timers_count_only_runs_an_owner_drives(api: APIClient) -> None:
    now = wall_ms()
    for status in ("pending", "running", "parked", "suspended", "completed"):
        run = WorkflowRun.objects.create(
            id=uuid.uuid4(), workflow_id=f"w-{status}", name="n", status=status
        )
        Timer.objects.create(run=run, kind="sleep", fire_at=now - 5_000)
        Timer.objects.create(run=run, kind="sleep", fire_at=now + 60_000)  # not due yet

    body = api.get(url("metrics/")).json()
    assert body["due_timers"] == 2  # running and parked
    assert cluster_status(now_ms=wall_ms()).due_timers == 2
    assert cluster_counters()["due_timers"] == 2
    assert body["oldest_due_timer_lag_ms"] >= 5_000
