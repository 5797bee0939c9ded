"""What a turn announces after it ends a run (``engine.wakes.announce``):
``finished`` for every end, ``child-completion`` for the parent of a child
that ended, and nothing to the parent of a child that was only suspended."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.e2e.helpers import latest, swapped_workflow
from weft_django import activity, client, workflow
from weft_django.engine.wakes import Wake, WakeBackend, backends

TURN_EVENTS = ("finished", "child-completion")


class Recorder(WakeBackend):
    name = "test-recorder"

    def __init__(self) -> None:
        self.wakes: list[Wake] = []

    def deliver(self, wake: Wake) -> None:
        if wake.event in TURN_EVENTS:
            self.wakes.append(wake)


@pytest.fixture
def recorder() -> Iterator[Recorder]:
    backend = backends.install(Recorder())
    assert isinstance(backend, Recorder)
    try:
        yield backend
    finally:
        backends.uninstall(Recorder)


@activity()
def tw_value(n: int) -> int:
    return n


@activity()
def tw_other(n: int) -> int:
    return n


@workflow(name="tw-child")
def tw_child(ctx, data):
    return (yield ctx.run(tw_value, data))


@workflow(name="tw-parent")
def tw_parent(ctx, data):
    return (yield ctx.start_child("tw-child", 7, workflow_id="tw-kid"))


@workflow(name="tw-sleepy-child")
def tw_sleepy_child(ctx, data):
    yield ctx.run(tw_value, 1)
    yield ctx.sleep(5)


@workflow(name="tw-waiting-parent")
def tw_waiting_parent(ctx, data):
    return (yield ctx.start_child("tw-sleepy-child", None, workflow_id="tw-sleepy-kid"))


def _changed_child(ctx, data):
    yield ctx.run(tw_other, 1)  # a deploy changed the first step: the journal diverges


@pytest.mark.django_db(transaction=True)
def test_a_child_that_ends_wakes_its_parent_and_both_announce_finished(weft_env, recorder):
    client.start("tw-parent", None, workflow_id="tw-dad")
    weft_env.run_until_idle()
    dad, kid = latest("tw-dad"), latest("tw-kid")
    assert (dad.status, dad.result) == ("completed", 7)
    assert [(w.event, w.run_id, w.workflow_id) for w in recorder.wakes] == [
        ("finished", str(kid.pk), "tw-kid"),
        ("child-completion", str(dad.pk), None),
        ("finished", str(dad.pk), "tw-dad"),
    ]
    assert {w.using for w in recorder.wakes} == {"default"}


@pytest.mark.django_db(transaction=True)
def test_a_suspended_child_announces_finished_but_does_not_wake_its_parent(weft_env, recorder):
    client.start("tw-waiting-parent", None, workflow_id="tw-mum")
    weft_env.run_until_idle()
    assert latest("tw-sleepy-kid").status == "parked"
    with swapped_workflow("tw-sleepy-child", _changed_child):
        weft_env.advance(10)
        weft_env.run_until_idle()
    kid, mum = latest("tw-sleepy-kid"), latest("tw-mum")
    assert kid.status == "suspended"
    assert mum.status == "parked"
    assert [(w.event, w.run_id) for w in recorder.wakes] == [("finished", str(kid.pk))]
