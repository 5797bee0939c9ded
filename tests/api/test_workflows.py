"""Happy paths of the workflow endpoints (SPEC §5), driven by a test engine."""

from __future__ import annotations

from typing import Any

import pytest

from tests.api import workflows as wf
from tests.api.conftest import url
from weft_django.models import ClaimEvent, WorkflowRun

pytestmark = pytest.mark.django_db(transaction=True)


def start(api: Any, **body: Any) -> Any:
    response = api.post(url("workflows/"), body, format="json")
    assert response.status_code in (200, 201), response.json()
    return response


def test_start_returns_201_and_the_pending_run(api: Any) -> None:
    response = api.post(
        url("workflows/"),
        {"name": "api-signal", "input": {"n": 3}, "workflow_id": "order:o-1@shop.example"},
        format="json",
    )
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["workflow_id"] == "order:o-1@shop.example"
    assert body["status"] == "pending"
    assert body["input"] == {"n": 3}
    assert body["epoch"] == 0 and body["owner"] is None
    assert body["pending_async_token"] is None
    run = WorkflowRun.objects.get(workflow_id="order:o-1@shop.example")
    assert body["run_id"] == str(run.pk)
    assert response["Location"].endswith("/api/weft/workflows/order:o-1@shop.example/")


def test_start_with_a_generated_id_and_options(api: Any) -> None:
    body = start(api, name="api-signal", start_after=60, execution_timeout=3600, input=None).json()
    run = WorkflowRun.objects.get(pk=body["run_id"])
    assert run.workflow_id == body["workflow_id"]
    assert run.start_at is not None and run.deadline_at is not None
    assert body["start_at"] == run.start_at
    assert run.deadline_at - run.start_at == pytest.approx(3_600_000, abs=50)


def test_start_at_an_aware_datetime(api: Any) -> None:
    body = start(api, name="api-signal", start_at="2030-01-01T00:00:00Z").json()
    assert body["start_at"] == 1_893_456_000_000


def test_idempotency_key_returns_the_existing_run_with_200(api: Any) -> None:
    first = api.post(
        url("workflows/"), {"name": "api-signal", "idempotency_key": "k-1"}, format="json"
    )
    assert first.status_code == 201
    again = api.post(
        url("workflows/"), {"name": "api-signal", "idempotency_key": "k-1"}, format="json"
    )
    assert again.status_code == 200
    assert again.json()["run_id"] == first.json()["run_id"]
    assert WorkflowRun.objects.filter(idempotency_key="k-1").count() == 1


def test_idempotency_key_with_another_name_is_a_409(api: Any) -> None:
    start(api, name="api-signal", idempotency_key="k-2")
    response = api.post(
        url("workflows/"), {"name": "api-flaky", "idempotency_key": "k-2"}, format="json"
    )
    assert response.status_code == 409
    body = response.json()
    assert body["code"] == "idempotency_conflict"
    assert body["existing_name"] == "api-signal" and body["requested_name"] == "api-flaky"


def test_list_filters_and_paginates(api: Any) -> None:
    for i in range(3):
        start(api, name="api-signal", workflow_id=f"list-{i}")
    start(api, name="api-flaky", workflow_id="list-flaky")
    response = api.get(url("workflows/"), {"page_size": 2})
    body = response.json()
    assert response.status_code == 200
    assert body["count"] == 4 and len(body["results"]) == 2 and body["next"]
    assert body["results"][0]["workflow_id"] == "list-flaky"  # newest first
    page2 = api.get(body["next"]).json()
    assert len(page2["results"]) == 2 and page2["previous"]

    names = api.get(url("workflows/"), {"name": "api-flaky"}).json()
    assert [r["workflow_id"] for r in names["results"]] == ["list-flaky"]
    by_id = api.get(url("workflows/"), {"workflow_id": "list-1"}).json()
    assert [r["workflow_id"] for r in by_id["results"]] == ["list-1"]
    pending = api.get(url("workflows/"), {"status": "pending"}).json()
    assert pending["count"] == 4
    assert api.get(url("workflows/"), {"status": "completed"}).json()["count"] == 0


def test_detail_history_signal_and_query_through_completion(api: Any, weft_env: Any) -> None:
    start(api, name="api-signal", workflow_id="sig-1", input={"n": 21})
    weft_env.run_until_idle()

    detail = api.get(url("workflows/sig-1/")).json()
    assert detail["status"] == "parked"
    assert detail["epoch"] >= 1
    assert detail["owner"]["engine_id"] == weft_env.engine.engine_id
    assert detail["owner"]["epoch"] == detail["epoch"]

    history = api.get(url("workflows/sig-1/history/")).json()
    assert history["count"] >= 1
    assert any(e["result"] == 42 for e in history["results"])
    assert [e["position"] for e in history["results"]] == sorted(
        e["position"] for e in history["results"]
    )

    progress = api.post(url("workflows/sig-1/query/"), {"name": "progress"}, format="json")
    assert progress.status_code == 200, progress.json()
    assert progress.json() == {
        "workflow_id": "sig-1",
        "name": "progress",
        "result": {"stage": "waiting"},
    }
    added = api.post(url("workflows/sig-1/query/"), {"name": "add", "args": [2, 3]}, format="json")
    assert added.json()["result"] == 5

    signal = api.post(
        url("workflows/sig-1/signal/"), {"name": "go", "payload": {"ok": True}}, format="json"
    )
    assert signal.status_code == 202, signal.json()
    assert signal.json()["name"] == "go" and signal.json()["run_id"] == detail["run_id"]
    weft_env.run_until_idle()

    done = api.get(url("workflows/sig-1/")).json()
    assert done["status"] == "completed"
    assert done["result"] == {"doubled": 42, "got": {"ok": True}}
    assert done["finished_at"] is not None

    # Signalling a terminal run is an invalid transition.
    late = api.post(url("workflows/sig-1/signal/"), {"name": "go"}, format="json")
    assert late.status_code == 409 and late.json()["code"] == "invalid_transition"


def test_cancel_records_reason_and_actor(api: Any, staff_user: Any, weft_env: Any) -> None:
    start(api, name="api-signal", workflow_id="c-1")
    weft_env.run_until_idle()
    response = api.post(url("workflows/c-1/cancel/"), {"reason": "customer"}, format="json")
    assert response.status_code == 200, response.json()
    body = response.json()
    assert body["status"] == "cancelled"
    assert body["error"]["message"] == "customer"
    assert body["owner"] is None
    rotation = ClaimEvent.objects.filter(workflow_id="c-1", kind="rotate").get()
    assert rotation.engine_id == "api:staff"
    assert rotation.reason == "customer"
    again = api.post(url("workflows/c-1/cancel/"), format="json")
    assert again.status_code == 409 and again.json()["status"] == "cancelled"


def test_suspend_and_resume(api: Any, weft_env: Any) -> None:
    start(api, name="api-signal", workflow_id="s-1")
    weft_env.run_until_idle()
    suspended = api.post(url("workflows/s-1/suspend/"), {"reason": "ops"}, format="json")
    assert suspended.status_code == 200, suspended.json()
    assert suspended.json()["status"] == "suspended"
    assert suspended.json()["suspended_reason"] == "ops"
    twice = api.post(url("workflows/s-1/suspend/"))
    assert twice.status_code == 409 and twice.json()["action"] == "suspend"

    resumed = api.post(url("workflows/s-1/resume/"))
    assert resumed.status_code == 200 and resumed.json()["status"] == "pending"
    weft_env.run_until_idle()
    assert api.get(url("workflows/s-1/")).json()["status"] == "parked"
    not_suspended = api.post(url("workflows/s-1/resume/"))
    assert not_suspended.status_code == 409
    assert not_suspended.json()["code"] == "invalid_transition"


def test_retry_a_failed_run(api: Any, weft_env: Any) -> None:
    start(api, name="api-flaky", workflow_id="f-1", input="x")
    weft_env.run_until_idle()
    failed = api.get(url("workflows/f-1/")).json()
    assert failed["status"] == "failed", failed
    assert "flaky x failed" in str(failed["error"])

    wf.FLAKY["fail"] = False
    retried = api.post(url("workflows/f-1/retry/"))
    assert retried.status_code == 200 and retried.json()["status"] == "pending"
    weft_env.run_until_idle()
    done = api.get(url("workflows/f-1/")).json()
    assert done["status"] == "completed" and done["result"] == "ok:x"
    completed = api.post(url("workflows/f-1/retry/"))
    assert completed.status_code == 409 and completed.json()["status"] == "completed"


def test_purge_deletes_terminal_runs_only(api: Any, weft_env: Any) -> None:
    start(api, name="api-signal", workflow_id="p-1")
    weft_env.run_until_idle()
    live = api.post(url("workflows/p-1/purge/"))
    assert live.status_code == 409 and live.json()["action"] == "purge"
    api.post(url("workflows/p-1/cancel/"), format="json")
    purged = api.post(url("workflows/p-1/purge/"))
    assert purged.status_code == 200
    assert purged.json() == {"workflow_id": "p-1", "purged_runs": 1}
    gone = api.get(url("workflows/p-1/"))
    assert gone.status_code == 404 and gone.json()["code"] == "workflow_not_found"
    # The claim (and its epoch) outlives the runs: the timeline stays readable.
    events = api.get(url("workflows/p-1/claim-events/"))
    assert events.status_code == 200 and events.json()["count"] >= 2


def test_start_new_after_terminal_and_older_runs_by_run_id(api: Any, weft_env: Any) -> None:
    first = start(api, name="api-signal", workflow_id="r-1").json()
    weft_env.run_until_idle()
    api.post(url("workflows/r-1/cancel/"), format="json")
    again = api.post(url("workflows/"), {"name": "api-signal", "workflow_id": "r-1"}, format="json")
    assert again.status_code == 409 and again.json()["code"] == "invalid_transition"
    second = api.post(
        url("workflows/"),
        {"name": "api-signal", "workflow_id": "r-1", "on_conflict": "start-new"},
        format="json",
    )
    assert second.status_code == 201, second.json()
    assert second.json()["run_id"] != first["run_id"]
    live = api.post(
        url("workflows/"),
        {"name": "api-signal", "workflow_id": "r-1", "on_conflict": "start-new"},
        format="json",
    )
    assert live.status_code == 409 and live.json()["code"] == "workflow_already_running"

    old = api.get(url("workflows/r-1/"), {"run_id": first["run_id"]}).json()
    assert old["status"] == "cancelled" and old["run_id"] == first["run_id"]
    old_history = api.get(url("workflows/r-1/history/"), {"run_id": first["run_id"]})
    assert old_history.status_code == 200 and old_history.json()["count"] >= 1
    latest = api.get(url("workflows/r-1/")).json()
    assert latest["run_id"] == second.json()["run_id"]


def test_child_detail_names_its_parent(api: Any, weft_env: Any) -> None:
    start(api, name="api-parent", workflow_id="par", input="par")
    weft_env.run_until_idle()
    child = api.get(url("workflows/par-child/"))
    assert child.status_code == 200, child.json()
    parent = api.get(url("workflows/par/")).json()
    assert child.json()["parent_workflow_id"] == "par"
    assert child.json()["parent_run_id"] == parent["run_id"]
