"""``manage.py weft`` on one workflow id: every subcommand, with and without
``--json``, and each bad input refused with nothing written (issue #20).

Runs are driven by a real engine on a fake clock (``weft_env``), so what
``show`` and ``result`` print is what the engine wrote.
"""

from __future__ import annotations

from typing import Any

import pytest

import tests.cli.workflows  # noqa: F401  (registers the workflows)
from tests.cli.helpers import weft
from tests.e2e.helpers import row_counts
from weft_django import client
from weft_django.models import SignalMessage, WorkflowRun

pytestmark = pytest.mark.django_db(transaction=True)


def latest(workflow_id: str) -> WorkflowRun:
    run = WorkflowRun.objects.latest_for(workflow_id)
    assert run is not None
    return run


@pytest.fixture
def store(weft_env: Any) -> Any:
    """A waiter parked on its signal, a failed run, a completed run, a suspended sleeper."""
    client.start("cli-waiter", {"n": 1}, workflow_id="w1")
    client.start("cli-failing", {"n": 2}, workflow_id="f1")
    client.start("cli-quick", {"n": 3}, workflow_id="q1")
    client.start("cli-sleeper", {"n": 4}, workflow_id="s1")
    weft_env.run_until_idle()
    client.suspend("s1", "maintenance")
    assert {r.workflow_id: r.status for r in WorkflowRun.objects.all()} == {
        "w1": "parked",
        "f1": "failed",
        "q1": "completed",
        "s1": "suspended",
    }
    return weft_env


# -- start ------------------------------------------------------------------------------


def test_start_prints_the_workflow_id(weft_env: Any) -> None:
    ran = weft("start", "cli-quick", "--input", '{"n": 7}', "--id", "q7")
    assert ran.exit_code == 0
    assert ran.out == "q7\n"
    run = latest("q7")
    assert f"started: cli-quick q7 run {run.pk}" in ran.err
    assert (run.name, run.status, run.input) == ("cli-quick", "pending", {"n": 7})
    weft_env.run_until_idle()
    assert latest("q7").result == {"n": 7}


def test_start_json_and_the_idempotency_key(weft_env: Any) -> None:
    first = weft("start", "cli-quick", "--input", "[1, 2]", "--idempotency-key", "k1", "--json")
    assert first.exit_code == 0 and first.err == ""
    body = first.data
    run = WorkflowRun.objects.get(idempotency_key="k1")
    assert body == {
        "workflow_id": run.workflow_id,
        "run_id": str(run.pk),
        "name": "cli-quick",
        "status": "pending",
        "created_at": body["created_at"],
        "started_at": None,
        "finished_at": None,
        "created": True,
    }
    again = weft("start", "cli-quick", "--input", "[1, 2]", "--idempotency-key", "k1", "--json")
    assert again.data["run_id"] == str(run.pk) and again.data["created"] is False
    assert WorkflowRun.objects.count() == 1
    # Without --input the input is null.
    weft("start", "cli-quick", "--id", "q-null")
    assert latest("q-null").input is None


@pytest.mark.parametrize("json_flag", [False, True])
def test_start_refuses_bad_input_and_writes_nothing(weft_env: Any, json_flag: bool) -> None:
    client.start("cli-waiter", 1, workflow_id="busy")
    before = row_counts()
    extra = ("--json",) if json_flag else ()
    cases = [
        (("start", "cli-quick", "--input", "{'n': 1}"), 2, "invalid_json", "{'n': 1}"),
        (("start", "cli-quick", "--input", ""), 2, "invalid_json", "--input"),
        (
            ("start", "no-such-workflow", "--input", "1"),
            2,
            "unknown_workflow_type",
            "no-such-workflow",
        ),
        (("start", "cli-quick", "--id", "bad id\n"), 2, "invalid_argument", "bad id"),
        (("start", "cli-quick", "--id", "busy"), 4, "workflow_already_running", "busy"),
    ]
    for args, exit_code, code, named in cases:
        ran = weft(*args, *extra)
        assert ran.exit_code == exit_code, (args, ran)
        assert named in ran.message, (args, ran.message)
        if json_flag:
            error = ran.data["error"]
            assert error["code"] == code and error["message"] == ran.message
        else:
            assert ran.out == ""
    assert row_counts() == before


def test_invalid_json_error_names_option_and_value(weft_env: Any) -> None:
    ran = weft("start", "cli-quick", "--input", "{not json", "--json")
    assert ran.data == {
        "error": {
            "code": "invalid_json",
            "message": "--input is not valid JSON (Expecting property name enclosed in "
            "double quotes at line 1 column 2): '{not json'",
            "option": "--input",
            "value": "{not json",
        }
    }


# -- signal -----------------------------------------------------------------------------


def test_signal_text_and_json(store: Any) -> None:
    run = latest("w1")
    ran = weft("signal", "w1", "go", "--payload", '{"ok": true}')
    assert ran.exit_code == 0
    assert ran.out == f"sent signal 'go' to w1 (run {run.pk})\n"
    store.run_until_idle()
    assert latest("w1").result == {"first": {"n": 1}, "got": {"ok": True}}

    client.start("cli-waiter", 2, workflow_id="w2")
    store.run_until_idle()
    ran = weft("signal", "w2", "go", "--json")
    assert ran.data == {
        "workflow_id": "w2",
        "run_id": str(latest("w2").pk),
        "signal": "go",
        "sent": True,
    }
    store.run_until_idle()
    assert latest("w2").result == {"first": 2, "got": None}


@pytest.mark.parametrize("json_flag", [False, True])
def test_signal_refuses_bad_input_and_writes_nothing(store: Any, json_flag: bool) -> None:
    before = row_counts()
    extra = ("--json",) if json_flag else ()
    cases = [
        (("signal", "w1", "go", "--payload", "nope"), 2, "invalid_json", "'nope'"),
        (("signal", "ghost", "go"), 3, "workflow_not_found", "ghost"),
        (("signal", "q1", "go"), 4, "invalid_transition", "q1"),
        (("signal", "w1", ""), 2, "invalid_argument", "''"),
    ]
    for args, exit_code, code, named in cases:
        ran = weft(*args, *extra)
        assert ran.exit_code == exit_code, (args, ran)
        assert named in ran.message, (args, ran.message)
        if json_flag:
            assert ran.data["error"]["code"] == code
    assert row_counts() == before
    assert SignalMessage.objects.count() == 0


# -- list -------------------------------------------------------------------------------


def test_list_text_and_json(store: Any) -> None:
    ran = weft("list")
    lines = ran.out.splitlines()
    assert lines[0].split() == [
        "WORKFLOW",
        "ID",
        "NAME",
        "STATUS",
        "CREATED",
        "(UTC)",
        "FINISHED",
        "(UTC)",
    ]
    assert sorted(line.split()[0] for line in lines[1:]) == ["f1", "q1", "s1", "w1"]
    assert any(line.split()[:3] == ["f1", "cli-failing", "failed"] for line in lines)

    body = weft("list", "--json").data
    assert body["count"] == 4 and body["limit"] == 100 and body["truncated"] is False
    by_id = {row["workflow_id"]: row for row in body["runs"]}
    assert by_id["q1"]["status"] == "completed" and by_id["q1"]["finished_at"].endswith("Z")
    assert by_id["w1"]["finished_at"] is None
    # Newest first.
    runs = WorkflowRun.objects.order_by("-created_at", "-pk")
    assert [row["run_id"] for row in body["runs"]] == [str(r.pk) for r in runs]


def test_list_filters_and_limit(store: Any) -> None:
    body = weft("list", "--status", "failed", "--status", "completed", "--json").data
    assert sorted(r["workflow_id"] for r in body["runs"]) == ["f1", "q1"]
    body = weft("list", "--workflow", "cli-waiter", "--json").data
    assert [r["workflow_id"] for r in body["runs"]] == ["w1"]
    body = weft("list", "--limit", "1", "--json").data
    assert body["count"] == 1 and body["truncated"] is True
    ran = weft("list", "--limit", "1")
    newest = WorkflowRun.objects.order_by("-created_at", "-pk")[0]
    assert f"(the newest 1 shown; more with --after {newest.pk} or a larger --limit)" in ran.out
    assert weft("list", "--status", "cancelled").out == "(no runs match)\n"
    ran = weft("list", "--limit", "0", "--json")
    assert ran.exit_code == 2 and ran.data["error"]["code"] == "invalid_argument"


# -- show -------------------------------------------------------------------------------


def test_show_a_parked_run(store: Any) -> None:
    run = latest("w1")
    body = weft("show", "w1", "--json").data
    assert body["workflow_id"] == "w1" and body["run_id"] == str(run.pk)
    assert body["status"] == "parked" and body["input"] == {"n": 1}
    assert [(w["kind"], w["name"]) for w in body["waiting_for"]] == [("signal", "go")]
    assert body["journal_total"] == len(body["journal"]) >= 1
    first = body["journal"][0]
    assert (first["position"], first["target"]) == (0, "tests.cli.workflows.cli_echo")
    assert first["failed"] is False and first["at"].endswith("Z")

    text = weft("show", "w1").out
    assert "status:    parked" in text
    assert "waiting for:\n  - signal 'go'" in text
    assert f"journal ({body['journal_total']} entries):" in text


def test_show_bounds_the_journal_and_shows_errors(store: Any) -> None:
    full = weft("show", "f1", "--json").data
    assert full["status"] == "failed" and full["error"] is not None
    assert full["waiting_for"] == []
    assert full["journal_total"] >= 2 and any(e["failed"] for e in full["journal"])
    last = weft("show", "f1", "--journal", "1", "--json").data
    assert (
        last["journal"] == full["journal"][-1:] and last["journal_total"] == full["journal_total"]
    )
    assert weft("show", "f1", "--journal", "0", "--json").data["journal"] == []
    text = weft("show", "f1", "--journal", "1").out
    assert f"journal ({full['journal_total']} entries, the last 1 shown):" in text
    assert "error:" in text and "FAILED" in text
    suspended = weft("show", "s1").out
    assert "suspended: maintenance" in suspended
    client.start("cli-sleeper", 5, workflow_id="s2")
    store.run_until_idle()
    (wait,) = weft("show", "s2", "--json").data["waiting_for"]
    assert wait["kind"] == "timer" and wait["text"].startswith("the sleep to end in")


@pytest.mark.parametrize("json_flag", [False, True])
def test_show_unknown_id(store: Any, json_flag: bool) -> None:
    ran = weft("show", "ghost", *(("--json",) if json_flag else ()))
    assert ran.exit_code == 3 and '"ghost"' in ran.message
    if json_flag:
        assert ran.data == {
            "error": {
                "code": "workflow_not_found",
                "message": 'No workflow with id "ghost" exists.',
                "workflow_id": "ghost",
            }
        }
    ran = weft("show", "w1", "--journal", "-1", *(("--json",) if json_flag else ()))
    assert ran.exit_code == 2 and "--journal" in ran.message


# -- cancel / retry / resume by id ------------------------------------------------------


def test_cancel_by_id(store: Any) -> None:
    ran = weft("cancel", "w1", "--reason", "operator")
    assert ran.exit_code == 0
    run = latest("w1")
    assert run.status == "cancelled"
    assert ran.out == f"cancel: w1 (run {run.pk}) is now cancelled\n"
    client.start("cli-waiter", 1, workflow_id="w3")
    store.run_until_idle()
    body = weft("cancel", "w3", "--json").data
    assert body["action"] == "cancel" and body["status"] == "cancelled"
    assert body["workflow_id"] == "w3" and body["finished_at"] is not None


def test_a_graceful_cancel_says_so(weft_env: Any) -> None:
    client.start("cli-graceful", 0, workflow_id="g1")
    weft_env.run_until_idle()
    ran = weft("cancel", "g1", "--reason", "stop")
    assert ran.exit_code == 0, ran
    run = latest("g1")
    assert run.cancel_requested_at is not None and run.status != "cancelled"
    assert ran.out == (
        f"cancel: g1 (run {run.pk}) is now {run.status}; cancel requested: the workflow "
        "cleans up, then ends cancelled\n"
    )
    shown = weft("show", "g1", "--json").data
    assert shown["cancel_reason"] == "stop" and shown["cancel_requested_at"].endswith("Z")
    assert "cancel requested at" in weft("show", "g1").out
    # The owner takes the rotated claim back after one renew interval, cleans up.
    weft_env.run_until_idle()
    weft_env.advance(weft_env.engine.settings.claim_renew_interval_ms / 1000)
    weft_env.run_until_idle()
    assert latest("g1").status == "cancelled"
    assert weft("show", "g1", "--json").data["journal"][-1]["summary"] == '"cleaned up"'


def test_retry_and_resume_by_id(store: Any) -> None:
    ran = weft("retry", "f1")
    assert ran.exit_code == 0 and ran.out.startswith("retry: f1 (run ")
    assert latest("f1").status == "pending"
    store.run_until_idle()
    assert latest("f1").status == "failed"
    assert weft("retry", "f1", "--json").data["status"] == "pending"

    ran = weft("resume", "s1")
    assert ran.exit_code == 0 and latest("s1").status not in ("suspended",)
    client.suspend("s1")
    body = weft("resume", "s1", "--json").data
    assert body["action"] == "resume" and body["status"] != "suspended"


@pytest.mark.parametrize("json_flag", [False, True])
def test_actions_refused_write_nothing(store: Any, json_flag: bool) -> None:
    before = row_counts()
    states = list(WorkflowRun.objects.order_by("pk").values_list("pk", "status", "version"))
    extra = ("--json",) if json_flag else ()
    cases = [
        (("cancel", "q1"), 4, "invalid_transition", "q1"),
        (("retry", "q1"), 4, "invalid_transition", "q1"),
        (("resume", "w1"), 4, "invalid_transition", "w1"),
        (("cancel", "ghost"), 3, "workflow_not_found", "ghost"),
        (("retry", "ghost"), 3, "workflow_not_found", "ghost"),
        (("resume", "ghost"), 3, "workflow_not_found", "ghost"),
        (("cancel", "w1", "--status", "parked"), 2, "invalid_argument", "'w1'"),
        (("retry", "f1", "--dry-run"), 2, "invalid_argument", "--dry-run"),
        (("resume", "s1", "--all", "--yes"), 2, "invalid_argument", "--all, --yes"),
    ]
    for args, exit_code, code, named in cases:
        ran = weft(*args, *extra)
        assert ran.exit_code == exit_code, (args, ran)
        assert named in ran.message, (args, ran.message)
        if json_flag:
            assert ran.data["error"]["code"] == code
        else:
            assert ran.out == ""
    assert row_counts() == before
    assert list(WorkflowRun.objects.order_by("pk").values_list("pk", "status", "version")) == states


# -- result -----------------------------------------------------------------------------


def test_result_of_a_completed_run(store: Any) -> None:
    ran = weft("result", "q1")
    assert ran.exit_code == 0 and ran.out == '{\n  "n": 3\n}\n'
    assert weft("result", "q1", "--json").data == {
        "workflow_id": "q1",
        "run_id": str(latest("q1").pk),
        "status": "completed",
        "result": {"n": 3},
    }


def test_result_waits_up_to_the_timeout(store: Any) -> None:
    ran = weft("result", "w1", "--timeout", "0.05")
    assert ran.exit_code == 5 and "still parked after 0.05 s" in ran.message
    body = weft("result", "w1", "--json").data
    assert body["error"]["code"] == "timeout" and "'w1'" in body["error"]["message"]
    ran = weft("result", "w1", "--timeout", "-1", "--json")
    assert ran.exit_code == 2 and ran.data["error"]["option"] == "--timeout"


@pytest.mark.parametrize("json_flag", [False, True])
def test_result_of_a_failed_or_unknown_run(store: Any, json_flag: bool) -> None:
    extra = ("--json",) if json_flag else ()
    ran = weft("result", "f1", *extra)
    assert ran.exit_code == 1 and 'Workflow "f1" ended failed' in ran.message
    if json_flag:
        error = ran.data["error"]
        assert error["code"] == "workflow_failed" and error["status"] == "failed"
        assert error["error"] == latest("f1").error
    ran = weft("result", "ghost", *extra)
    assert ran.exit_code == 3 and "ghost" in ran.message
