"""The API's start body carries every conflict policy and the fairness options
of ``client.start``: ``on_conflict`` "use-existing" / "terminate-existing",
``fairness_key`` and ``fairness_weight``."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import override_settings

from tests.api.conftest import url
from weft_django.models import WorkflowRun

pytestmark = pytest.mark.django_db(transaction=True)


def post(api: Any, **body: Any) -> Any:
    return api.post(url("workflows/"), {"name": "api-signal", **body}, format="json")


def test_use_existing_returns_the_live_run_then_starts_anew(api: Any, weft_env: Any) -> None:
    first = post(api, workflow_id="pol-1")
    assert first.status_code == 201
    weft_env.run_until_idle()
    same = post(api, workflow_id="pol-1", on_conflict="use-existing", input={"other": 1})
    assert same.status_code == 200, same.json()
    assert same.json()["run_id"] == first.json()["run_id"]
    assert WorkflowRun.objects.filter(workflow_id="pol-1").count() == 1
    api.post(url("workflows/pol-1/cancel/"), format="json")
    weft_env.run_until_idle()
    fresh = post(api, workflow_id="pol-1", on_conflict="use-existing")
    assert fresh.status_code == 201, fresh.json()
    assert fresh.json()["run_id"] != first.json()["run_id"]


def test_terminate_existing_ends_the_live_run_and_starts_one(api: Any, weft_env: Any) -> None:
    first = post(api, workflow_id="pol-2")
    weft_env.run_until_idle()
    second = post(api, workflow_id="pol-2", on_conflict="terminate-existing")
    assert second.status_code == 201, second.json()
    assert second.json()["run_id"] != first.json()["run_id"]
    old = WorkflowRun.objects.get(pk=first.json()["run_id"])
    assert old.status == "terminated"
    live = WorkflowRun.objects.filter(workflow_id="pol-2").exclude(status="terminated")
    assert [str(r.pk) for r in live] == [second.json()["run_id"]]


def test_an_unknown_policy_is_refused_and_nothing_written(api: Any) -> None:
    bad = post(api, workflow_id="pol-3", on_conflict="replace-existing")
    assert bad.status_code == 400 and "on_conflict" in bad.json()["errors"]
    assert not WorkflowRun.objects.filter(workflow_id="pol-3").exists()


@override_settings(WEFT={"QUEUES": {"fair-api": {"concurrency": 2, "fair": True}}})
def test_fairness_key_and_weight_are_stored(api: Any) -> None:
    ok = post(api, workflow_id="pol-4", queue="fair-api", fairness_key="t-1", fairness_weight=3)
    assert ok.status_code == 201, ok.json()
    run = WorkflowRun.objects.get(workflow_id="pol-4")
    assert (run.fairness_key, run.fairness_weight) == ("t-1", 3)
    for weight in (0, 1001, "x"):
        bad = post(api, workflow_id="pol-5", queue="fair-api", fairness_weight=weight)
        assert bad.status_code == 400 and "fairness_weight" in bad.json()["errors"], weight
    assert not WorkflowRun.objects.filter(workflow_id="pol-5").exists()
