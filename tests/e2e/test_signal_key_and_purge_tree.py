"""``client.signal(..., idempotency_key=)``: one signal per key per workflow id,
from the client, the API, the CLI and concurrent callers; ``client.purge(ids=)``
and ``purge(children=True)``: descendants reached, a live run refuses the whole
purge naming it, bad input writes nothing."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.db import connection
from rest_framework.test import APIClient

from tests.cli.helpers import weft
from tests.e2e.helpers import latest, row_counts
from weft_django import activity, client, workflow
from weft_django.errors import InvalidArgumentError, InvalidTransitionError, WorkflowNotFound
from weft_django.models import SignalMessage, WorkflowRun

pytestmark = pytest.mark.django_db(transaction=True)


@activity(name="sk.echo")
def sk_echo(value: Any) -> Any:
    return value


@workflow(name="sk-collect")
def sk_collect(ctx: Any, data: Any) -> Any:
    got = []
    while len(got) < 2:
        got.append((yield ctx.wait_for_signal("item")))
    return got


@workflow(name="sk-leaf")
def sk_leaf(ctx: Any, data: Any) -> Any:
    if data == "wait":
        yield ctx.wait_for_signal("go")
    return (yield ctx.run(sk_echo, data))


@workflow(name="sk-parent")
def sk_parent(ctx: Any, data: Any) -> Any:
    child = yield ctx.start_child("sk-mid", data, workflow_id=f"{ctx.workflow_id}-mid")
    detached = yield ctx.start_child(
        "sk-leaf", data["detached"], workflow_id=f"{ctx.workflow_id}-free", detached=True
    )
    return [child, detached]


@workflow(name="sk-mid")
def sk_mid(ctx: Any, data: Any) -> Any:
    return (yield ctx.start_child("sk-leaf", "deep", workflow_id=f"{ctx.workflow_id}-leaf"))


def signals(workflow_id: str) -> list[tuple[str, Any, str | None]]:
    return list(
        SignalMessage.objects.filter(run__workflow_id=workflow_id)
        .order_by("id")
        .values_list("name", "payload", "idempotency_key")
    )


# -- signal idempotency -----------------------------------------------------------------


def test_a_repeated_key_records_one_signal(weft_env) -> None:
    client.start("sk-collect", None, workflow_id="sk-1")
    weft_env.run_until_idle()
    first = client.signal("sk-1", "item", 1, idempotency_key="order-1")
    again = client.signal("sk-1", "item", 1, idempotency_key="order-1")
    assert again.pk == first.pk and again.run_id == first.run_id
    other = client.signal("sk-1", "item", 2, idempotency_key="order-2")
    assert other.pk != first.pk
    assert signals("sk-1") == [("item", 1, "order-1"), ("item", 2, "order-2")]
    weft_env.run_until_idle()
    assert latest("sk-1").result == [1, 2]
    # Once per key per workflow: the key is free on another workflow id.
    client.start("sk-collect", None, workflow_id="sk-2")
    weft_env.run_until_idle()
    assert client.signal("sk-2", "item", 1, idempotency_key="order-1").pk != first.pk
    # Without a key every call is a signal, as before.
    client.signal("sk-2", "item", 5)
    client.signal("sk-2", "item", 5)
    assert [s[1] for s in signals("sk-2")] == [1, 5, 5]


def test_a_key_reused_for_another_signal_or_bad_is_refused(weft_env) -> None:
    client.start("sk-collect", None, workflow_id="sk-3")
    weft_env.run_until_idle()
    client.signal("sk-3", "item", 1, idempotency_key="k")
    before = row_counts()
    with pytest.raises(InvalidArgumentError, match="'k' already recorded signal 'item'"):
        client.signal("sk-3", "item", 2, idempotency_key="k")
    with pytest.raises(InvalidArgumentError, match="'k' already recorded"):
        client.signal("sk-3", "other", 1, idempotency_key="k")
    for bad in ("", "x" * 256, "nul\x00", 7):
        with pytest.raises(InvalidArgumentError, match="idempotency_key"):
            client.signal("sk-3", "item", 1, idempotency_key=bad)  # type: ignore[arg-type]
    assert row_counts() == before


def test_concurrent_callers_with_one_key_record_one_signal(weft_env) -> None:
    client.start("sk-collect", None, workflow_id="sk-4")
    weft_env.run_until_idle()
    callers = 6
    barrier = threading.Barrier(callers)
    got: list[Any] = []
    errors: list[BaseException] = []

    def call() -> None:
        try:
            barrier.wait()
            got.append(client.signal("sk-4", "item", "x", idempotency_key="once").pk)
        except BaseException as exc:  # reported below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=call) for _ in range(callers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert len(got) == callers and len(set(got)) == 1
    assert signals("sk-4") == [("item", "x", "once")]


def test_api_and_cli_retries_signal_once(weft_env, django_user_model) -> None:
    client.start("sk-collect", None, workflow_id="sk-5")
    weft_env.run_until_idle()
    api = APIClient()
    api.force_login(django_user_model.objects.create_user("ops", password="x", is_staff=True))
    body = {"name": "item", "payload": 1, "idempotency_key": "http-1"}
    first = api.post("/api/weft/workflows/sk-5/signal/", body, format="json")
    retried = api.post("/api/weft/workflows/sk-5/signal/", body, format="json")
    assert first.status_code == retried.status_code == 202, retried.json()
    assert first.json()["signal_id"] == retried.json()["signal_id"]
    bad = api.post(
        "/api/weft/workflows/sk-5/signal/", {**body, "idempotency_key": ""}, format="json"
    )
    assert bad.status_code == 400
    for _ in range(2):
        ran = weft("signal", "sk-5", "item", "--payload", "2", "--idempotency-key", "cli-1")
        assert ran.exit_code == 0, ran
    assert signals("sk-5") == [("item", 1, "http-1"), ("item", 2, "cli-1")]
    ran = weft("signal", "sk-5", "item", "--payload", "3", "--idempotency-key", "cli-1")
    assert ran.exit_code == 2 and "'cli-1' already recorded" in ran.message


# -- purge: ids, children, live runs ----------------------------------------------------


def family(env: Any, root: str, detached: str = "free") -> None:
    client.start("sk-parent", {"detached": detached}, workflow_id=root)
    env.run_until_idle()


def test_purge_children_reaches_every_descendant(weft_env) -> None:
    family(weft_env, "fam-1")
    family(weft_env, "fam-2")
    assert latest("fam-1").status == "completed"
    tree = {"fam-1", "fam-1-mid", "fam-1-mid-leaf"}
    assert set(WorkflowRun.objects.values_list("workflow_id", flat=True)) >= tree
    assert client.purge("fam-1", children=True) == 3
    left = set(WorkflowRun.objects.values_list("workflow_id", flat=True))
    assert not left & tree
    # A detached child has no parent link: it outlives its parent, and its purge.
    assert "fam-1-free" in left
    assert {"fam-2", "fam-2-mid", "fam-2-mid-leaf", "fam-2-free"} <= left
    # Without children only the named id goes.
    assert client.purge(ids=["fam-2"]) == 1
    assert "fam-2-mid" in set(WorkflowRun.objects.values_list("workflow_id", flat=True))


def test_purge_ids_takes_a_list_in_one_batch(weft_env) -> None:
    for n in range(3):
        client.start("sk-leaf", n, workflow_id=f"pl-{n}")
    weft_env.run_until_idle()
    assert client.purge(ids=["pl-0", "pl-1", "pl-0"]) == 2
    assert list(
        WorkflowRun.objects.filter(workflow_id__startswith="pl-").values_list(
            "workflow_id", flat=True
        )
    ) == ["pl-2"]


def test_a_live_run_refuses_the_whole_purge_naming_it(weft_env) -> None:
    family(weft_env, "fam-3")
    client.start("sk-leaf", 1, workflow_id="done-1")
    weft_env.run_until_idle()
    assert latest("fam-3").status == "completed"
    # A grandchild left suspended under a finished parent (a store edited by hand,
    # a child whose parent ended while it was being repaired).
    WorkflowRun.objects.filter(workflow_id="fam-3-mid-leaf").update(status="suspended")
    before = row_counts()
    with pytest.raises(InvalidTransitionError) as caught:
        client.purge(ids=["done-1", "fam-3"], children=True)
    assert (caught.value.workflow_id, caught.value.status) == ("fam-3-mid-leaf", "suspended")
    assert "fam-3-mid-leaf" in str(caught.value) and "suspended" in str(caught.value)
    assert row_counts() == before
    client.start("sk-leaf", "wait", workflow_id="live-1")
    weft_env.run_until_idle()
    with pytest.raises(InvalidTransitionError, match='"live-1": its latest run is parked'):
        client.purge(ids=["done-1", "live-1"])
    with pytest.raises(InvalidTransitionError, match="live-1"):
        client.purge("live-1")
    assert WorkflowRun.objects.filter(workflow_id__in=["done-1", "fam-3"]).count() == 2
    assert WorkflowRun.objects.filter(workflow_id__startswith="fam-3").count() == 4
    assert client.purge(ids=["done-1", "fam-3"]) == 2  # without children: allowed


def test_purge_bad_input_writes_nothing(weft_env) -> None:
    client.start("sk-leaf", 1, workflow_id="keep-1")
    weft_env.run_until_idle()
    before = row_counts()
    with pytest.raises(WorkflowNotFound, match="nope"):
        client.purge(ids=["keep-1", "nope"])
    for bad, match in (
        ({"ids": "keep-1"}, "ids must be a non-empty list"),
        ({"ids": []}, "ids must be a non-empty list"),
        ({"ids": ["keep-1", 3]}, "workflow_id 3"),
        ({"workflow_id": "keep-1", "ids": ["keep-1"]}, "one of workflow_id, ids or older_than"),
        ({}, "one of workflow_id, ids or older_than"),
        ({"ids": ["keep-1"], "children": "yes"}, "children must be True or False"),
    ):
        with pytest.raises(InvalidArgumentError, match=match):
            client.purge(**bad)
    assert row_counts() == before
