"""``ctx.deprecate_patch``: the three deploys of a change (``engine.patches``).

Release 0 has no patch; release 1 guards the new step with ``ctx.patched``;
release 2 calls ``ctx.deprecate_patch`` and takes the new step always;
release 3 drops the call. Runs are driven by a real engine (``weft_env``);
each deploy is a swap of the registered function; ``weft_replay_check`` says
which live runs each release can replay.
"""

from __future__ import annotations

import contextlib
import io
import json
from collections import Counter
from datetime import timedelta
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from tests.e2e.helpers import journal, swapped_workflow
from weft_django import activity, client, workflow
from weft_django.engine.workflow.context import WorkflowContext
from weft_django.models import JournalEntry, WorkflowRun

pytestmark = pytest.mark.django_db(transaction=True)

CALLS: Counter[str] = Counter()


@pytest.fixture(autouse=True)
def _reset() -> None:
    CALLS.clear()


@activity(name="dp.step")
def dp_step(key: str) -> str:
    CALLS["step"] += 1
    return f"step:{key}"


@activity(name="dp.survey")
def dp_survey(key: str) -> str:
    CALLS["survey"] += 1
    return f"survey:{key}"


@workflow(name="dp-order")
def release_0(ctx: Any, data: Any) -> Any:
    first = yield ctx.run(dp_step, data)
    yield ctx.sleep(timedelta(seconds=10))
    approved = yield ctx.wait_for_signal("approved")
    return {"first": first, "survey": None, "approved": approved}


def release_1(ctx: Any, data: Any) -> Any:
    first = yield ctx.run(dp_step, data)
    survey = None
    if ctx.patched("survey"):
        survey = yield ctx.run(dp_survey, data)
    yield ctx.sleep(timedelta(seconds=10))
    approved = yield ctx.wait_for_signal("approved")
    return {"first": first, "survey": survey, "approved": approved}


def release_2(ctx: Any, data: Any) -> Any:
    first = yield ctx.run(dp_step, data)
    ctx.deprecate_patch("survey")
    survey = yield ctx.run(dp_survey, data)
    yield ctx.sleep(timedelta(seconds=10))
    approved = yield ctx.wait_for_signal("approved")
    return {"first": first, "survey": survey, "approved": approved}


def release_3(ctx: Any, data: Any) -> Any:
    first = yield ctx.run(dp_step, data)
    survey = yield ctx.run(dp_survey, data)
    yield ctx.sleep(timedelta(seconds=10))
    approved = yield ctx.wait_for_signal("approved")
    return {"first": first, "survey": survey, "approved": approved}


def replay_failures() -> list[str]:
    """The workflow ids ``weft_replay_check`` reports under the registered code."""
    out = io.StringIO()
    with contextlib.suppress(CommandError):  # exit 1 on findings: the JSON is the answer
        call_command("weft_replay_check", "--json", stdout=out, stderr=io.StringIO())
    return sorted(f["workflow_id"] for f in json.loads(out.getvalue())["failures"])


def park(env: Any, workflow_id: str) -> None:
    """Start a run under the registered code and drive it past its sleep."""
    client.start("dp-order", workflow_id, workflow_id=workflow_id)
    env.run_until_idle()
    env.advance(timedelta(seconds=10))
    env.run_until_idle()
    assert WorkflowRun.objects.get(workflow_id=workflow_id).status == "parked"


def finish(env: Any, workflow_id: str) -> Any:
    client.signal(workflow_id, "approved", True)
    env.run_until_idle()
    run = WorkflowRun.objects.get(workflow_id=workflow_id)
    assert run.status == "completed", run.error
    return run.result


def test_the_three_deploys_of_a_change(weft_env) -> None:
    park(weft_env, "dp-old")  # release 0: no marker, the old path
    with swapped_workflow("dp-order", release_1):
        park(weft_env, "dp-mid")  # release 1, live: records the marker, takes the new path
    assert [k for k, _ in journal(WorkflowRun.objects.get(workflow_id="dp-old"))] == [
        "activity",
        "sleep",
    ]
    mid_marker = JournalEntry.objects.get(run__workflow_id="dp-mid", kind="patch")
    assert (mid_marker.target, mid_marker.result) == ("survey", True)

    with swapped_workflow("dp-order", release_2):
        # A run that recorded the marker replays; one that passed the point on the
        # old path does not (Temporal: deprecate only once such runs are gone).
        assert replay_failures() == ["dp-old"]
        park(weft_env, "dp-new")  # release 2, live: records a deprecated marker
        new_marker = JournalEntry.objects.get(run__workflow_id="dp-new", kind="patch")
        assert (new_marker.target, new_marker.result) == ("survey", {"deprecated": True})
        assert finish(weft_env, "dp-mid")["survey"] == "survey:dp-mid"
    assert CALLS["survey"] == 2  # mid (release 1) and new (release 2); replays ran none

    with swapped_workflow("dp-order", release_1):
        # Side by side with release 1 (a rollback): the deprecated marker is True
        # there, and dp-old (no marker) is back on its old path.
        assert replay_failures() == []

    with swapped_workflow("dp-order", release_3):
        # The call removed: a deprecated marker is skipped, so dp-new replays.
        assert replay_failures() == ["dp-old"]
        assert finish(weft_env, "dp-new") == {
            "first": "step:dp-new",
            "survey": "survey:dp-new",
            "approved": True,
        }
    assert CALLS["survey"] == 2


def test_removing_patched_itself_too_early_is_reported(weft_env) -> None:
    """A ``patched`` marker (not deprecated) is never skipped: release 3 straight
    after release 1 breaks the runs that recorded it, and the gate says so."""
    with swapped_workflow("dp-order", release_1):
        park(weft_env, "dp-mid")
    with swapped_workflow("dp-order", release_3):
        assert replay_failures() == ["dp-mid"]
    with swapped_workflow("dp-order", release_2):
        assert replay_failures() == []


class _Runtime:
    is_replaying = False

    def __init__(self) -> None:
        self.calls: list[str] = []

    def clock_ms(self) -> int:
        return 0

    def side_effect(self, kind: str, target: str, make: Any) -> Any:
        return make()

    def patched(self, change_id: str) -> bool:
        self.calls.append(f"patched {change_id}")
        return True

    def deprecate_patch(self, change_id: str) -> None:
        self.calls.append(f"deprecate {change_id}")


@pytest.mark.parametrize("bad", ["", 7, None, "x" * 201])
def test_a_bad_change_id_is_refused_by_name(bad: Any) -> None:
    runtime = _Runtime()
    ctx = WorkflowContext(runtime, "wf", "run", "dp-order")
    with pytest.raises(ValueError, match="change_id") as excinfo:
        ctx.deprecate_patch(bad)
    assert repr(bad)[:50] in str(excinfo.value)
    with pytest.raises(ValueError, match="change_id"):
        ctx.patched(bad)
    assert runtime.calls == []
    ctx.deprecate_patch("ok")
    assert runtime.calls == ["deprecate ok"]
