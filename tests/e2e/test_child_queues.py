"""Children and ``continue_as_new`` obey their queue.

Protects: a child of a queued workflow (attached or detached), or one
started with ``ctx.start_child(queue=...)``, is written ``pending`` with
its queue by the parent's checkpoint and admitted like any queued run --
never more of them running than the queue allows -- while the parent
waits for it as before; a bad flow option fails the child command and
writes no child; ``continue_as_new`` of a queued run keeps its slot and
its queue, so the count never drops in between.
"""

from __future__ import annotations

import pytest
from django.test import override_settings

from tests.e2e.helpers import latest
from weft_django import client, workflow
from weft_django.conf import build_settings
from weft_django.engine import Engine
from weft_django.models import WorkflowRun
from weft_django.ownership.slots import live_slots

QUEUES = {
    "child-q": {"concurrency": 2},
    "named-q": {"concurrency": 1, "per_key_concurrency": 1},
    "loop-q": {"concurrency": 1},
}


@workflow(name="cq-child", queue="child-q")
def cq_child(ctx, data):
    got = yield ctx.wait_for_signal("go")
    return [data, got]


@workflow(name="cq-free-child")
def cq_free_child(ctx, data):
    got = yield ctx.wait_for_signal("go")
    return [data, got]


@workflow(name="cq-parent")
def cq_parent(ctx, data):
    calls = [ctx.start_child("cq-child", i, workflow_id=f"{data}-c{i}") for i in range(4)]
    return (yield ctx.all(*calls))


@workflow(name="cq-detacher")
def cq_detacher(ctx, data):
    ids = []
    for i in range(4):
        ids.append((yield ctx.start_child("cq-child", i, f"{data}-d{i}", detached=True)))
    return ids


@workflow(name="cq-named")
def cq_named(ctx, data):
    return (
        yield ctx.start_child(
            "cq-free-child",
            data["input"],
            data["child"],
            queue=data["queue"],
            priority=data["priority"],
            concurrency_key=data["key"],
        )
    )


@workflow(name="cq-loop", queue="loop-q")
def cq_loop(ctx, n):
    yield ctx.wait_for_signal("go")
    if n > 0:
        yield ctx.continue_as_new(n - 1)
    return "done"


pytestmark = [pytest.mark.django_db(transaction=True)]


@pytest.fixture(autouse=True)
def _queues():
    with override_settings(WEFT={"QUEUES": QUEUES}):
        yield


def _engine(clock, **kw):
    return Engine(clock=clock, background_tasks="manual", **kw).boot()


def _live(name: str) -> int:
    return live_slots(build_settings({"QUEUES": QUEUES})[0].queues[name], "default").count()


def _children(prefix: str) -> list[WorkflowRun]:
    return list(WorkflowRun.objects.filter(workflow_id__startswith=prefix, name="cq-child"))


def _release(prefix: str) -> None:
    for run in WorkflowRun.objects.filter(workflow_id__startswith=prefix, status="parked"):
        if run.name != "cq-parent" and run.name != "cq-detacher":
            client.signal(run.workflow_id, "go", "ok")


def test_attached_children_wait_for_their_queue_and_the_parent_for_them(clock):
    engine = _engine(clock)
    try:
        handle = client.start("cq-parent", "p", workflow_id="p")
        engine.run_until_idle()
        children = _children("p-c")
        assert len(children) == 4
        assert {c.queue for c in children} == {"child-q"}
        assert sorted(c.status for c in children) == ["parked", "parked", "pending", "pending"]
        assert _live("child-q") == 2
        assert latest("p").status == "parked"
        for _ in range(3):
            _release("p-c")
            engine.run_until_idle()
            assert _live("child-q") <= 2
        assert handle.result(timeout=0) == [[i, "ok"] for i in range(4)]
    finally:
        engine.dispose(grace=0)


def test_detached_children_wait_for_their_queue(clock):
    engine = _engine(clock)
    try:
        handle = client.start("cq-detacher", "x", workflow_id="x")
        engine.run_until_idle()
        assert handle.result(timeout=0) == [f"x-d{i}" for i in range(4)]
        children = _children("x-d")
        assert {c.queue for c in children} == {"child-q"}
        assert {c.parent_id for c in children} == {None}
        assert sorted(c.status for c in children) == ["parked", "parked", "pending", "pending"]
        _release("x-d")
        engine.run_until_idle()
        assert sorted(c.status for c in _children("x-d")) == [
            "completed",
            "completed",
            "parked",
            "parked",
        ]
        assert _live("child-q") == 2
    finally:
        engine.dispose(grace=0)


def test_start_child_names_its_own_queue_priority_and_key(clock):
    engine = _engine(clock)
    try:
        spec = {"child": "n-kid", "input": 7, "queue": "named-q", "priority": 3, "key": "k"}
        handle = client.start("cq-named", spec, workflow_id="n")
        engine.run_until_idle()
        kid = latest("n-kid")
        assert (kid.queue, kid.priority, kid.concurrency_key) == ("named-q", 3, "k")
        assert kid.status == "parked" and _live("named-q") == 1
        client.signal("n-kid", "go", "ok")
        engine.run_until_idle()
        assert handle.result(timeout=0) == [7, "ok"]
    finally:
        engine.dispose(grace=0)


def test_a_bad_child_queue_fails_the_command_and_writes_no_child(clock):
    engine = _engine(clock)
    try:
        spec = {"child": "b-kid", "input": 1, "queue": "nope-q", "priority": 0, "key": None}
        handle = client.start("cq-named", spec, workflow_id="b")
        engine.run_until_idle()
        run = latest("b")
        assert run.status == "failed"
        assert "nope-q" in str(run.error)
        assert not WorkflowRun.objects.filter(workflow_id="b-kid").exists()
        with pytest.raises(Exception, match="b-kid"):
            handle.result(timeout=0)
    finally:
        engine.dispose(grace=0)


def test_continue_as_new_keeps_the_slot_and_the_queue(clock):
    engine = _engine(clock)
    try:
        client.start("cq-loop", 2, workflow_id="loop")
        client.start("cq-loop", 0, workflow_id="other")
        engine.run_until_idle()
        assert latest("other").status == "pending"
        for remaining in (1, 0):
            client.signal("loop", "go", 1)
            engine.run_until_idle()
            new = latest("loop")
            assert (new.queue, new.status, new.input) == ("loop-q", "parked", remaining)
            assert _live("loop-q") == 1
            assert latest("other").status == "pending"  # no slot freed in between
        client.signal("loop", "go", 1)
        engine.run_until_idle()
        assert latest("loop").status == "completed"
        assert latest("other").status == "parked"  # the slot passed on only now
        assert _live("loop-q") == 1
    finally:
        engine.dispose(grace=0)
