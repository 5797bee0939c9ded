"""``python manage.py weft ...`` as a real process: one test per exit status,
stdout parsed as JSON, stderr the human sentence (issue #20).

The children run the example project's workflows (``order``, ``three-steps``:
autodiscovered from ``project.demo``) against the test database; the test
process drives them with ``weft_env`` where a run must finish.
"""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest

from tests.e2e.helpers import row_counts
from tests.support import REPO_ROOT, child_env, python
from weft_django.models import WorkflowRun

pytestmark = pytest.mark.django_db(transaction=True)


def manage(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [python(), "manage.py", "weft", *args],
        cwd=REPO_ROOT,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )


def error_of(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    body = json.loads(done.stdout)
    assert set(body) == {"error"}, body
    assert f"CommandError: {body['error']['message']}" in done.stderr
    assert "Traceback" not in done.stderr
    return dict(body["error"])


def test_exit_statuses_of_a_real_process(weft_env: Any) -> None:
    order = {"id": "p-1", "amount": 5}
    # 0: started; the workflow id alone on stdout.
    done = manage("start", "order", "--input", json.dumps(order), "--id", "p-1")
    assert (done.returncode, done.stdout) == (0, "p-1\n"), done.stderr
    assert WorkflowRun.objects.get(workflow_id="p-1").input == order

    # 5: not finished (answered at once).
    done = manage("result", "p-1", "--json")
    assert done.returncode == 5
    assert error_of(done)["code"] == "timeout"

    # 2: bad input, nothing written -- an invalid --input, an argparse usage error.
    before = row_counts()
    done = manage("start", "order", "--input", "{oops", "--json")
    assert done.returncode == 2
    assert error_of(done)["value"] == "{oops"
    done = manage("list", "--limit", "many", "--json")
    assert done.returncode == 2
    error = error_of(done)
    assert error["code"] == "usage" and "'many'" in error["message"]
    done = manage("list", "--attr", "colour=red", "--json")  # no such search attribute
    assert done.returncode == 2
    error = error_of(done)
    assert (error["code"], error["key"], error["value"]) == (
        "invalid_run_filter",
        "attr",
        "colour=red",
    )
    done = manage("list", "--limit", "many")  # without --json: argparse's usage text
    assert done.returncode == 2 and "usage: manage.py weft list" in done.stderr
    assert done.stdout == ""
    assert row_counts() == before

    # 3: no such workflow id.
    done = manage("show", "p-nobody", "--json")
    assert done.returncode == 3
    assert error_of(done) == {
        "code": "workflow_not_found",
        "message": 'No workflow with id "p-nobody" exists.',
        "workflow_id": "p-nobody",
    }

    # 0 then 4: cancelled, then cancelling again is refused.
    done = manage("cancel", "p-1", "--reason", "from a shell", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["status"] == "cancelled"
    done = manage("cancel", "p-1", "--json")
    assert done.returncode == 4
    assert error_of(done)["code"] == "invalid_transition"

    # 1: the run ended otherwise.
    done = manage("result", "p-1")
    assert done.returncode == 1
    assert 'CommandError: Workflow "p-1" ended cancelled' in done.stderr and done.stdout == ""


def test_result_show_and_list_of_a_finished_run(weft_env: Any) -> None:
    done = manage("start", "three-steps", "--input", '{"id": "p-3"}', "--id", "p-3", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["created"] is True
    weft_env.run_until_idle()
    done = manage("result", "p-3", "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)["result"]
    assert result == WorkflowRun.objects.get(workflow_id="p-3").result
    # Django's own options after the subcommand as well as before it.
    done = manage("show", "p-3", "--json", "--verbosity", "0")
    assert done.returncode == 0, done.stderr
    body = json.loads(done.stdout)
    assert body["status"] == "completed" and body["journal_total"] == len(body["journal"]) >= 3
    done = manage("--verbosity", "0", "list", "--status", "completed")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[1].split()[:3] == ["p-3", "three-steps", "completed"]


def test_a_closed_pipe_exits_zero_quietly(weft_env: Any) -> None:
    """``manage.py weft list | head -n 1``: the reader leaves before the output is
    written; the command exits 0 with nothing on stderr (1 means "the run failed")."""
    for n in range(3):
        manage("start", "order", "--input", json.dumps({"id": f"pipe-{n}", "amount": 1}))
    proc = subprocess.Popen(
        [python(), "manage.py", "weft", "list"],
        cwd=REPO_ROOT,
        env=child_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # the reader is gone before a line is written
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 0, err
    assert err == ""
