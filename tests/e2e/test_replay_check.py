"""The deploy gate (issue #20): ``weft_replay_check``, the ``check --deploy`` check
``weft.W050`` and the admin's "Replay against current code".

Runs are driven to a parked state by a real engine (``weft_env``); a deploy is
simulated by swapping the registered function (``swapped_workflow``) or, for
the command, by a child process that imports release 2 of the workflows.
"""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.core.checks import run_checks
from django.core.management import call_command
from django.core.management.base import CommandError, SystemCheckError

import tests.e2e.replay_workflows as v1
from tests.e2e.helpers import row_counts, swapped_workflow
from tests.support import REPO_ROOT, child_env, python
from weft_django import client
from weft_django.checks.replay import check_live_runs_replay
from weft_django.engine.replay.check import check_live_runs
from weft_django.engine.workflow.definitions import registry
from weft_django.models import JournalEntry, WorkflowRun

pytestmark = pytest.mark.django_db(transaction=True)


def rc_order_changed(ctx: Any, data: Any) -> Any:
    """Release 2 of ``rc-order``: another activity where position 0 recorded ``rc.step``."""
    first = yield ctx.run(v1.rc_other, data["id"])
    yield ctx.sleep(timedelta(seconds=10))
    approved = yield ctx.wait_for_signal("approved")
    return {"first": first, "approved": approved}


def rc_order_compatible(ctx: Any, data: Any) -> Any:
    """A compatible release: the same commands, a different result shape."""
    first = yield ctx.run(v1.rc_step, data["id"])
    yield ctx.sleep(timedelta(seconds=10))
    approved = yield ctx.wait_for_signal("approved")
    return {"first": first, "approved": approved, "v": 2}


@contextlib.contextmanager
def removed_workflow(name: str) -> Iterator[None]:
    """The deploy renamed or removed ``@workflow(name=...)``."""
    with registry.lock:
        definition = registry.workflows.pop(name)
    try:
        yield
    finally:
        with registry.lock:
            registry.workflows[name] = definition


def parked_store(env: Any) -> dict[str, WorkflowRun]:
    """Two rc-order runs parked on their signal (past the sleep), one parked on
    its sleep, one rc-stable run, and a completed rc-stable run."""
    for wid in ("rc-a", "rc-b"):
        client.start("rc-order", {"id": wid}, workflow_id=wid)
    env.run_until_idle()
    env.advance(timedelta(seconds=10))
    env.run_until_idle()
    client.start("rc-order", {"id": "rc-c"}, workflow_id="rc-c")
    client.start("rc-stable", {"id": "s1"}, workflow_id="rc-s1")
    client.start("rc-stable", {"id": "s2"}, workflow_id="rc-s2")
    env.run_until_idle()
    client.signal("rc-s2", "go", 1)
    env.run_until_idle()
    runs = {run.workflow_id: run for run in WorkflowRun.objects.all()}
    assert {wid: run.status for wid, run in runs.items()} == {
        "rc-a": "parked",
        "rc-b": "parked",
        "rc-c": "parked",
        "rc-s1": "parked",
        "rc-s2": "completed",
    }
    return runs


def snapshot() -> tuple[dict[str, int], list[tuple[Any, ...]]]:
    """Row counts and every column a write to a run or journal entry would change."""
    runs = list(
        WorkflowRun.objects.order_by("pk").values_list(
            "pk", "status", "version", "wake_seq", "parked_seq", "updated_at", "turn_started_at"
        )
    )
    entries = list(JournalEntry.objects.order_by("pk").values_list("pk", "result", "epoch"))
    return row_counts(), runs + entries


def command(*args: str) -> tuple[str, str, CommandError | None]:
    out, err = io.StringIO(), io.StringIO()
    try:
        call_command("weft_replay_check", *args, stdout=out, stderr=err)
    except CommandError as exc:
        return out.getvalue(), err.getvalue(), exc
    return out.getvalue(), err.getvalue(), None


# -- weft_replay_check ------------------------------------------------------------------


def test_unchanged_code_passes_and_nothing_is_written(weft_env) -> None:
    parked_store(weft_env)
    before = snapshot()
    out, _, failed = command()
    assert failed is None, out
    assert "4 live run(s) replayed, 0 finding(s)" in out  # the completed run is not live
    with swapped_workflow("rc-order", rc_order_compatible):
        out, _, failed = command()
    assert failed is None, out
    assert snapshot() == before


def test_a_changed_workflow_fails_with_each_run_named(weft_env) -> None:
    runs = parked_store(weft_env)
    before = snapshot()
    with swapped_workflow("rc-order", rc_order_changed):
        out, _, failed = command()
    assert failed is not None and failed.returncode == 1
    assert "4 live run(s) replayed, 3 finding(s)" in str(failed)
    lines = [line for line in out.splitlines() if line.startswith("NON-DETERMINISM")]
    assert len(lines) == 3, out
    for wid in ("rc-a", "rc-b", "rc-c"):
        (line,) = [line for line in lines if f" {wid} " in line]
        assert f"run {runs[wid].pk}" in line and "rc-order" in line
        assert "at position 0: recorded 'activity rc.step', now 'activity rc.other'" in line
    assert "rc-s1" not in out  # the unchanged workflow's run replays
    assert snapshot() == before
    # The engine would suspend them with the same error: the gate saw what a deploy would.
    with swapped_workflow("rc-order", rc_order_changed):
        client.signal("rc-a", "approved", True)
        weft_env.run_until_idle()
    assert WorkflowRun.objects.get(workflow_id="rc-a").status == "suspended"


def test_json_shape(weft_env) -> None:
    runs = parked_store(weft_env)
    with swapped_workflow("rc-order", rc_order_changed):
        out, _, failed = command("--json", "--workflow", "rc-order")
    assert failed is not None and failed.returncode == 1
    data = json.loads(out)  # stdout is the JSON object alone
    assert set(data) == {"checked", "skipped", "failures"}
    assert data["checked"] == 3 and data["skipped"] == 0
    by_id = {f["workflow_id"]: f for f in data["failures"]}
    assert set(by_id) == {"rc-a", "rc-b", "rc-c"}
    assert by_id["rc-a"] == {
        "kind": "non-determinism",
        "workflow": "rc-order",
        "run_id": str(runs["rc-a"].pk),
        "workflow_id": "rc-a",
        "status": "parked",
        "position": 0,
        "recorded": "activity rc.step",
        "new": "activity rc.other",
        "message": by_id["rc-a"]["message"],
    }
    assert "journal position 0" in by_id["rc-a"]["message"]

    out, _, failed = command("--json", "--workflow", "rc-stable")
    assert failed is None
    assert json.loads(out) == {"checked": 1, "skipped": 0, "failures": []}


def test_limit_samples_and_counts_the_rest(weft_env) -> None:
    parked_store(weft_env)
    with swapped_workflow("rc-order", rc_order_changed):
        out, _, failed = command("--json", "--limit", "2", "--workflow", "rc-order")
    data = json.loads(out)
    assert data["checked"] == 2 and data["skipped"] == 1 and len(data["failures"]) == 2
    assert failed is not None


def test_unknown_workflow_is_its_own_finding(weft_env) -> None:
    parked_store(weft_env)
    with removed_workflow("rc-order"):
        out, _, failed = command("--json")
        assert failed is not None and failed.returncode == 1
        data = json.loads(out)
        assert data["checked"] == 1  # rc-s1; rc-order runs cannot be replayed at all
        assert data["failures"] == [
            {
                "kind": "unknown-workflow",
                "workflow": "rc-order",
                "runs": 3,
                "message": data["failures"][0]["message"],
            }
        ]
        assert "'rc-order'" in data["failures"][0]["message"]
        text, _, _ = command("--workflow", "rc-order")
        assert text.startswith("UNKNOWN WORKFLOW rc-order: 3 live run(s)")


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("--limit", "0"), "'0'"),
        (("--limit", "many"), "'many'"),
        (("--workflow", "no-such-flow"), "'no-such-flow'"),
    ],
)
def test_bad_arguments_name_the_value(weft_env, args: tuple[str, ...], needle: str) -> None:
    parked_store(weft_env)
    before = snapshot()
    with pytest.raises(CommandError, match=needle):
        call_command("weft_replay_check", *args, stdout=io.StringIO())
    assert snapshot() == before


def test_release_two_in_a_child_process(weft_env) -> None:
    """The realistic gate: the parked runs written by this process's code (release
    1), checked by ``manage.py weft_replay_check`` in a process that imports
    release 2 only."""
    runs = parked_store(weft_env)
    before = snapshot()

    def check(module: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [python(), "-m", "tests.procs.worker", module, "weft_replay_check", "--json"],
            cwd=REPO_ROOT,
            env=child_env(),
            capture_output=True,
            text=True,
            timeout=120,
        )

    old = check("tests.e2e.replay_workflows")
    assert old.returncode == 0, old.stderr
    assert json.loads(old.stdout) == {"checked": 4, "skipped": 0, "failures": []}

    new = check("tests.e2e.replay_workflows_v2")
    assert new.returncode == 1, new.stderr
    failures = json.loads(new.stdout)["failures"]
    assert sorted(f["run_id"] for f in failures) == sorted(
        str(runs[wid].pk) for wid in ("rc-a", "rc-b", "rc-c")
    )
    assert {(f["position"], f["recorded"], f["new"]) for f in failures} == {
        (0, "activity rc.step", "activity rc.other")
    }
    assert "3 finding(s)" in new.stderr
    assert snapshot() == before


def test_chunks_cover_every_run_once(weft_env) -> None:
    """Keyset chunks smaller than the store: every live run replayed exactly once."""
    parked_store(weft_env)
    for n in range(7):
        client.start("rc-stable", {"id": n}, workflow_id=f"rc-more-{n}")
    weft_env.run_until_idle()
    with swapped_workflow("rc-order", rc_order_changed):
        report = check_live_runs(chunk_size=2)
    assert report.checked == 11
    assert sorted(f.workflow_id or "" for f in report.failures) == ["rc-a", "rc-b", "rc-c"]
    with pytest.raises(ValueError, match="-1"):
        check_live_runs(limit=-1)


# -- check --deploy (weft.W050) ---------------------------------------------------------


def test_deploy_check_reports_a_changed_workflow(weft_env) -> None:
    parked_store(weft_env)
    assert check_live_runs_replay() == []
    gate = {"tags": ["weft_replay"], "deploy": True, "fail_level": "WARNING"}
    call_command("check", **gate, stdout=io.StringIO())

    before = snapshot()
    with swapped_workflow("rc-order", rc_order_changed):
        messages = check_live_runs_replay()
        with pytest.raises(SystemCheckError, match=r"weft\.W050"):
            call_command("check", **gate, stdout=io.StringIO())
    assert [m.id for m in messages] == ["weft.W050"] * 3
    assert all("position 0" in m.msg and "rc-order" in m.msg for m in messages)
    assert snapshot() == before
    # Without --deploy the check does not run (it reads the database).
    with swapped_workflow("rc-order", rc_order_changed):
        assert run_checks(tags=["weft_replay"]) == []
        assert [m.id for m in run_checks(tags=["weft_replay"], include_deployment_checks=True)] == [
            "weft.W050"
        ] * 3


def test_deploy_check_samples_every_workflow_name(weft_env, settings) -> None:
    parked_store(weft_env)
    settings.WEFT = {**settings.WEFT, "REPLAY_CHECK_SAMPLE": 2}  # one run per live name
    with swapped_workflow("rc-order", rc_order_changed):
        messages = check_live_runs_replay()
    assert len(messages) == 1 and "rc-order" in messages[0].msg
    with removed_workflow("rc-stable"):
        (message,) = check_live_runs_replay()
    assert message.id == "weft.W050" and "'rc-stable'" in message.msg


@pytest.mark.parametrize("where", ["unmigrated", "unreachable"])
def test_deploy_check_warns_when_the_database_cannot_be_read(tmp_path, where: str) -> None:
    url = (
        f"sqlite:///{tmp_path / 'empty.sqlite3'}"
        if where == "unmigrated"
        else "postgres://postgres@127.0.0.1:9/weft_nowhere"
    )
    result = subprocess.run(
        [python(), "manage.py", "check", "--deploy", "--tag", "weft_replay"],
        cwd=REPO_ROOT,
        env=child_env(DATABASE_URL=url),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert "weft.W051" in result.stderr + result.stdout
    assert "Traceback" not in result.stderr


# -- the admin action -------------------------------------------------------------------


def _replay_action(admin_client: Any, runs: list[WorkflowRun]) -> list[str]:
    from django.contrib.messages import get_messages
    from django.urls import reverse

    response = admin_client.post(
        reverse("admin:weft_workflowrun_changelist"),
        {"action": "replay_against_current_code", "_selected_action": [str(r.pk) for r in runs]},
        follow=True,
    )
    assert response.status_code == 200
    return [str(m) for m in get_messages(response.wsgi_request)]


def test_admin_action_shows_one_summary(weft_env, admin_client) -> None:
    runs = parked_store(weft_env)
    selected = list(runs.values())
    before = snapshot()
    assert _replay_action(admin_client, selected) == [
        "Replayed 5 run(s) against the current code: every one replays."
    ]
    with swapped_workflow("rc-order", rc_order_changed):
        (message,) = _replay_action(admin_client, selected)
    assert message.startswith("Replayed 5 run(s) against the current code: 3 would break: ")
    for wid in ("rc-a", "rc-b", "rc-c"):
        assert f"{wid} at position 0 recorded activity rc.step, now activity rc.other" in message
    assert snapshot() == before
