"""Fork and reset: a new run continues from a journal position of another run,
its recorded results reused; bad positions and unregistered workflows are
refused with nothing written."""

from __future__ import annotations

from typing import Any

import pytest

from project.demo.models import SideEffect
from tests.e2e.helpers import claim_events, latest, row_counts
from weft_django import activity, client, workflow
from weft_django.errors import (
    InvalidArgumentError,
    NonDeterminismError,
    UnknownWorkflowType,
)
from weft_django.models import JournalEntry, SignalMessage, WorkflowRun


@activity()
def fr_step(label: str) -> str:
    SideEffect.objects.create(kind="fork-step", key=label)
    return label.upper()


@workflow(name="fr-four")
def fr_four(ctx: Any, data: Any) -> Any:
    done = []
    for step in range(4):
        done.append((yield ctx.run(fr_step, f"step-{step}")))
    return done


@workflow(name="fr-wait")
def fr_wait(ctx: Any, data: Any) -> Any:
    first = yield ctx.run(fr_step, "w-0")
    second = yield ctx.run(fr_step, "w-1")
    got = yield ctx.wait_for_signal("go")
    return [first, second, got]


@workflow(name="fr-all")
def fr_all(ctx: Any, data: Any) -> Any:
    head = yield ctx.run(fr_step, "a-0")
    pair = yield ctx.all(ctx.run(fr_step, "a-1"), ctx.run(fr_step, "a-2"))
    return [head, *pair]


def _executions(label: str) -> int:
    return SideEffect.objects.filter(kind="fork-step", key=label).count()


@pytest.mark.django_db(transaction=True)
def test_fork_at_position_2_reruns_steps_2_and_3_only(weft_env):
    source = client.start("fr-four", None, workflow_id="fr-src")
    weft_env.run_until_idle()
    assert source.result(timeout=1) == ["STEP-0", "STEP-1", "STEP-2", "STEP-3"]

    forked = client.fork("fr-src", at_position=2, workflow_id_for_fork="fr-fork")
    assert forked.workflow_id == "fr-fork"
    copied = list(
        JournalEntry.objects.filter(run_id=forked.run_id)
        .order_by("position")
        .values_list("position", "target")
    )
    assert [position for position, _ in copied] == [0, 1]
    weft_env.run_until_idle()

    assert forked.result(timeout=1) == ["STEP-0", "STEP-1", "STEP-2", "STEP-3"]
    assert [_executions(f"step-{i}") for i in range(4)] == [1, 1, 2, 2]
    fork_run = WorkflowRun.objects.get(pk=forked.run_id)
    assert fork_run.continued_from_id is not None
    assert str(fork_run.continued_from_id) == source.run_id
    assert latest("fr-src").status == "completed"  # the source is untouched
    assert JournalEntry.objects.filter(run_id=source.run_id).count() == 4


@pytest.mark.django_db(transaction=True)
def test_fork_of_a_live_run_leaves_it_running(weft_env):
    source = client.start("fr-wait", None, workflow_id="fr-live")
    weft_env.run_until_idle()
    assert source.status() == "parked"
    forked = client.fork("fr-live", at_position=1)
    assert forked.workflow_id.startswith("fr-live-fork-")
    weft_env.run_until_idle()
    assert forked.status() == "parked"
    assert source.status() == "parked"
    assert (_executions("w-0"), _executions("w-1")) == (1, 2)
    client.signal(forked.workflow_id, "go", "forked")
    weft_env.run_until_idle()
    assert forked.result(timeout=1) == ["W-0", "W-1", "forked"]
    assert source.status() == "parked"


@pytest.mark.django_db(transaction=True)
def test_reset_of_a_parked_run_terminates_it_and_the_new_run_continues(weft_env):
    old = client.start("fr-wait", None, workflow_id="fr-reset")
    weft_env.run_until_idle()
    assert old.status() == "parked"
    epoch_events = len(claim_events("fr-reset"))

    new = client.reset("fr-reset", at_position=1, reason="bad data at step 1")
    assert new.workflow_id == "fr-reset" and new.run_id != old.run_id
    ended = WorkflowRun.objects.get(pk=old.run_id)
    assert ended.status == "terminated"
    assert ended.error == {"type": "Terminated", "message": "bad data at step 1"}
    assert claim_events("fr-reset")[epoch_events][0] == "rotate"  # claim rotated

    weft_env.run_until_idle()
    assert new.status() == "parked"
    assert (_executions("w-0"), _executions("w-1")) == (1, 2)
    client.signal("fr-reset", "go", "after reset")
    weft_env.run_until_idle()
    assert new.result(timeout=1) == ["W-0", "W-1", "after reset"]
    assert WorkflowRun.objects.get(pk=old.run_id).status == "terminated"


@pytest.mark.django_db(transaction=True)
def test_reset_carries_the_signals_received_after_the_position(weft_env):
    old = client.start("fr-wait", None, workflow_id="fr-sig")
    weft_env.run_until_idle()
    client.signal("fr-sig", "go", "early")
    weft_env.run_until_idle()
    assert old.result(timeout=1) == ["W-0", "W-1", "early"]
    new = client.reset("fr-sig", at_position=1)
    assert SignalMessage.objects.filter(run_id=new.run_id).count() == 1
    weft_env.run_until_idle()
    assert new.result(timeout=1) == ["W-0", "W-1", "early"]
    assert WorkflowRun.objects.get(pk=old.run_id).status == "completed"  # ended already


@pytest.mark.django_db(transaction=True)
def test_bad_positions_and_unregistered_workflows_write_nothing(weft_env):
    client.start("fr-all", None, workflow_id="fr-bad")
    weft_env.run_until_idle()
    assert latest("fr-bad").status == "completed"
    before = row_counts()

    with pytest.raises(InvalidArgumentError, match="at_position 9 is beyond the journal"):
        client.fork("fr-bad", at_position=9)
    with pytest.raises(InvalidArgumentError, match="at_position must be an integer"):
        client.reset("fr-bad", at_position="2")  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match=r"at_position 2 splits a ctx\.all group"):
        client.fork("fr-bad", at_position=2)
    with pytest.raises(InvalidArgumentError, match="splits"):
        client.reset("fr-bad", at_position=2)
    WorkflowRun.objects.filter(workflow_id="fr-bad").update(name="fr-gone")
    with pytest.raises(UnknownWorkflowType, match="fr-gone"):
        client.fork("fr-bad", at_position=1)
    WorkflowRun.objects.filter(workflow_id="fr-bad").update(name="fr-wait")
    with pytest.raises(NonDeterminismError, match="position 2"):
        client.fork("fr-bad", at_position=3)  # fr-wait waits for a signal at command 2
    assert row_counts() == before
