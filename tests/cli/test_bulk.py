"""``weft cancel|retry|resume`` with filter flags (issue #20 part 3's command):
``--dry-run``, ``--all``, the confirmation, the progress bar, ``--json``, and
bad input refused with nothing changed."""

from __future__ import annotations

import io
import json
import subprocess
from typing import Any

import pytest

import tests.cli.workflows  # noqa: F401  (registers the workflows)
from tests.cli.helpers import weft
from tests.e2e.helpers import row_counts
from tests.support import REPO_ROOT, child_env, python
from weft_django import client
from weft_django.engine.operations.bulk import DEFAULT_CHUNK_SIZE
from weft_django.models import WorkflowRun

pytestmark = pytest.mark.django_db(transaction=True)


def state() -> tuple[dict[str, int], list[tuple[Any, ...]]]:
    """Row counts and what any action would change on a run."""
    runs = WorkflowRun.objects.order_by("pk").values_list("pk", "status", "version", "wake_seq")
    return row_counts(), list(runs)


def statuses() -> dict[str, str]:
    return dict(WorkflowRun.objects.values_list("workflow_id", "status"))


@pytest.fixture
def mixed(weft_env: Any) -> Any:
    """Two parked waiters, two failed runs, one completed, two suspended sleepers."""
    for wid, name in (
        ("w1", "cli-waiter"),
        ("w2", "cli-waiter"),
        ("f1", "cli-failing"),
        ("f2", "cli-failing"),
        ("q1", "cli-quick"),
        ("s1", "cli-sleeper"),
        ("s2", "cli-sleeper"),
    ):
        client.start(name, 0, workflow_id=wid)
    weft_env.run_until_idle()
    client.suspend("s1")
    client.suspend("s2")
    return weft_env


def test_dry_run_counts_and_changes_nothing(mixed: Any) -> None:
    before = state()
    ran = weft("cancel", "--workflow", "cli-waiter", "--workflow", "cli-quick", "--dry-run")
    assert ran.exit_code == 0, ran
    assert ran.out == (
        "cancel (dry run): 3 run(s) match, 2 would change, 1 would be skipped; nothing changed\n"
    )
    body = weft("retry", "--status", "failed", "--dry-run", "--json").data
    assert body["dry_run"] is True
    assert (body["action"], body["matched"], body["changed"], body["skipped"]) == ("retry", 2, 2, 0)
    assert "status=failed" in body["filter"]
    assert weft("resume", "--all", "--dry-run", "--json").data["changed"] == 2
    assert state() == before


def test_each_action_by_filter(mixed: Any) -> None:
    ran = weft("cancel", "--workflow", "cli-waiter", "--reason", "bulk")
    assert ran.exit_code == 0, ran
    assert ran.out == "cancel: 2 run(s) matched, 2 changed, 0 skipped\n"
    assert "cancel [##############################] 2/2 (100%)" in ran.err
    body = weft("retry", "--status", "failed", "--json").data
    assert (body["action"], body["matched"], body["changed"], body["dry_run"]) == (
        "retry",
        2,
        2,
        False,
    )
    body = weft("resume", "--id", "s1", "--id", "q1", "--json").data
    assert (body["matched"], body["changed"], body["skipped"]) == (2, 1, 1)
    assert statuses() == {
        "w1": "cancelled",
        "w2": "cancelled",
        "f1": "pending",
        "f2": "pending",
        "q1": "completed",
        "s1": "pending",
        "s2": "suspended",
    }
    assert WorkflowRun.objects.get(workflow_id="w1").error["message"] == "bulk"


@pytest.mark.parametrize("json_flag", [False, True])
def test_bad_input_changes_nothing(mixed: Any, json_flag: bool) -> None:
    before = state()
    extra = ("--json",) if json_flag else ()
    cases = [
        (("cancel",), "all", "--all"),  # no filter: every run
        (("retry", "--dry-run"), "all", "--all"),
        (("cancel", "--status", "exploded"), "status", "exploded"),
        (("resume", "--created-after", "last tuesday"), "created_after", "last tuesday"),
        (("retry", "--attr", "colour=red"), "attr", "colour=red"),
    ]
    for args, key, named in cases:
        ran = weft(*args, *extra)
        assert ran.exit_code == 2, (args, ran)
        assert named in ran.message, (args, ran.message)
        if json_flag:
            error = ran.data["error"]
            assert (error["code"], error["key"]) == ("invalid_run_filter", key)
        else:
            assert ran.out == ""
    assert state() == before


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_terminal_is_asked_first(mixed: Any, monkeypatch: Any) -> None:
    before = state()
    monkeypatch.setattr("sys.stdin", Tty("n\n"))
    ran = weft("cancel", "--status", "parked")
    assert ran.exit_code == 1 and ran.message == "cancel not confirmed: nothing changed"
    assert "cancel: 2 run(s) match status=parked; 2 would change. Go on? [y/N] " in ran.err
    assert state() == before
    monkeypatch.setattr("sys.stdin", Tty("y\n"))
    ran = weft("cancel", "--status", "parked")
    assert ran.exit_code == 0 and statuses()["w1"] == "cancelled"
    # --yes, --json and --dry-run never ask.
    monkeypatch.setattr("sys.stdin", Tty(""))
    assert weft("retry", "--status", "failed", "--yes").exit_code == 0
    assert weft("resume", "--status", "suspended", "--json").exit_code == 0
    assert "[y/N]" not in weft("cancel", "--all", "--dry-run").err


def test_a_thousand_runs_with_a_progress_bar(weft_env: Any) -> None:
    for n in range(1000):
        client.start("cli-sleeper", n, workflow_id=f"many-{n}")
    client.start("cli-quick", 0, workflow_id="other")
    assert (
        weft("cancel", "--workflow", "cli-sleeper", "--dry-run", "--json").data["changed"] == 1000
    )
    ran = weft("cancel", "--workflow", "cli-sleeper", "--reason", "cleanup")
    assert ran.exit_code == 0, ran
    assert ran.out == "cancel: 1000 run(s) matched, 1000 changed, 0 skipped\n"
    # One callback per chunk; in a log (not a terminal) a line per new tenth.
    steps = range(DEFAULT_CHUNK_SIZE, 1001, DEFAULT_CHUNK_SIZE)
    expected = []
    for done in steps:
        filled = round(30 * done / 1000)
        expected.append(f"cancel [{'#' * filled}{'.' * (30 - filled)}] {done}/1000 ({done // 10}%)")
    assert ran.err.splitlines() == expected
    assert expected[-1] == "cancel [##############################] 1000/1000 (100%)"
    assert WorkflowRun.objects.filter(name="cli-sleeper", status="cancelled").count() == 1000
    assert WorkflowRun.objects.get(workflow_id="other").status == "pending"
    # Quiet at --verbosity 0; run again: everything is skipped.
    ran = weft("cancel", "--workflow", "cli-sleeper", "--verbosity", "0", "--json")
    assert ran.err == ""
    assert (ran.data["matched"], ran.data["changed"], ran.data["skipped"]) == (1000, 0, 1000)


def test_bulk_in_a_real_process(weft_env: Any) -> None:
    for n in range(3):
        client.start("order", {"id": f"b-{n}", "amount": 1}, workflow_id=f"b-{n}")
    run = subprocess.run(
        [python(), "manage.py", "weft", "cancel", "--workflow", "order", "--json"],
        cwd=REPO_ROOT,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert run.returncode == 0, run.stderr
    body = json.loads(run.stdout)
    assert (body["action"], body["matched"], body["changed"]) == ("cancel", 3, 3)
    assert run.stderr.splitlines()[-1] == "cancel [##############################] 3/3 (100%)"
    before = state()
    refused = subprocess.run(
        [python(), "manage.py", "weft", "retry", "--json"],
        cwd=REPO_ROOT,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert refused.returncode == 2
    error = json.loads(refused.stdout)["error"]
    assert (error["code"], error["key"]) == ("invalid_run_filter", "all")
    assert "--all" in error["message"]
    assert state() == before
