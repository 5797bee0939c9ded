"""Histories out of production: ``weft history export``, ``replay_history`` in a
fresh process on another database with nothing written, the deploy gate on
exported files, and bad files refused before anything replays."""

from __future__ import annotations

import contextlib
import io
import json
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

import tests.e2e.history_workflows as v1
from tests.e2e.helpers import row_counts
from tests.support import REPO_ROOT, child_env, python
from weft_django import client
from weft_django.engine.replay.history import (
    HISTORY_FORMAT,
    HISTORY_VERSION,
    HistoryFormatError,
    checksum_of,
    load_history,
)
from weft_django.errors import NonDeterminismError, WorkflowFailedError
from weft_django.testing import replay_history

pytestmark = pytest.mark.django_db(transaction=True)


def hist_order_changed(ctx: Any, data: Any) -> Any:
    """Release 2 of ``hist-order`` in this process: position 1 runs ``hist.other``."""
    first = yield ctx.run(v1.hist_step, data["id"])
    second = yield ctx.run(v1.hist_other, "second")
    approved = yield ctx.wait_for_signal("approved")
    return [first, second, approved]


def completed_run(env: Any, workflow_id: str = "hist-1") -> Any:
    handle = client.start("hist-order", {"id": "a"}, workflow_id=workflow_id)
    env.run_until_idle()
    client.signal(workflow_id, "approved", {"by": "ops"})
    env.run_until_idle()
    return handle


def export(*args: str) -> dict[str, Any]:
    out = io.StringIO()
    call_command("weft", "history", "export", *args, stdout=out)
    return json.loads(out.getvalue())


def write(tmp_path: Path, document: Any, name: str = "run.json") -> Path:
    path = tmp_path / name
    path.write_text(document if isinstance(document, str) else json.dumps(document, indent=2))
    return path


EXPECTED = {
    "first": "step:a",
    "second": "step:second",
    "bonus": True,
    "approved": {"by": "ops"},
}


def test_export_holds_the_run_and_verifies(weft_env) -> None:
    handle = completed_run(weft_env)
    assert handle.result(timeout=1) == EXPECTED
    document = export("hist-1")
    assert (document["format"], document["version"]) == (HISTORY_FORMAT, HISTORY_VERSION)
    assert document["checksum"] == checksum_of(document)
    assert document["workflow"] == {"name": "hist-order", "patches": ["hist-bonus"]}
    run = document["run"]
    assert (run["workflow_id"], run["run_id"], run["status"]) == (
        "hist-1",
        handle.run_id,
        "completed",
    )
    assert run["input"] == {"id": "a"} and run["result"] == EXPECTED
    kinds = [(e["position"], e["kind"], e["target"]) for e in document["journal"]]
    assert kinds[:3] == [
        (0, "activity", "hist.step"),
        (1, "activity", "hist.step"),
        (2, "patch", "hist-bonus"),
    ]
    assert kinds[3][0] == 3 and kinds[3][2] == "approved"
    assert document["journal"][0]["result"] == "step:a"
    assert [(s["name"], s["payload"], s["consumed_at_position"]) for s in document["signals"]] == [
        ("approved", {"by": "ops"}, 3)
    ]
    assert document["updates"] == []
    assert load_history(document) == document
    # --run names one run of the id; the latest is the default.
    assert export("hist-1", "--run", handle.run_id)["run"] == run


def test_export_bad_input_exits_with_the_value_named() -> None:
    with pytest.raises(CommandError, match="no-such-id"):
        call_command("weft", "history", "export", "no-such-id", stdout=io.StringIO())
    with pytest.raises(CommandError, match="'not-a-uuid'"):
        call_command("weft", "history", "export", "x", "--run", "not-a-uuid", stdout=io.StringIO())


def test_replay_in_this_thread_returns_the_result_and_writes_nothing(weft_env, tmp_path) -> None:
    completed_run(weft_env)
    path = write(tmp_path, export("hist-1"))
    before = row_counts()
    seen: list[int] = []
    body = v1.hist_order.__code__

    def tracer(frame: Any, event: str, arg: Any) -> Any:
        # What a debugger's breakpoint rests on: line events of the body's
        # frames, delivered to this thread's trace function.
        if frame.f_code is body:
            if event == "line":
                seen.append(threading.get_ident())
            return tracer
        return tracer if event == "call" and frame.f_code is body else None

    sys.settrace(tracer)
    try:
        assert replay_history(path) == EXPECTED
    finally:
        sys.settrace(None)
    assert seen and set(seen) == {threading.get_ident()}
    assert replay_history(json.loads(path.read_text())) == EXPECTED  # a dict works too
    assert row_counts() == before


def test_a_change_at_position_1_is_named(weft_env, tmp_path) -> None:
    completed_run(weft_env)
    path = write(tmp_path, export("hist-1"))
    with pytest.raises(NonDeterminismError) as caught:
        replay_history(path, workflow=hist_order_changed)
    assert (caught.value.position, caught.value.recorded, caught.value.new) == (
        1,
        "activity hist.step",
        "activity hist.other",
    )
    assert "position 1" in str(caught.value)


def test_a_failed_run_replays_to_its_failure(weft_env, tmp_path) -> None:
    client.start("hist-fails", {"n": 1}, workflow_id="hist-f")
    weft_env.run_until_idle()
    document = export("hist-f")
    assert document["run"]["status"] == "failed"
    with pytest.raises(WorkflowFailedError, match="refused"):
        replay_history(document)


def test_fresh_sqlite_process_replays_with_no_writes(weft_env, tmp_path) -> None:
    """Exported from this test's database (PostgreSQL under DATABASE_URL=postgres),
    replayed in a fresh process on a fresh SQLite file: the result, no writes;
    release 2 there names position 1, and so does the deploy gate on the file."""
    completed_run(weft_env)
    path = write(tmp_path, export("hist-1"))

    def child(module: str, db_name: str) -> dict[str, Any]:
        url = f"sqlite:///{tmp_path / db_name}"
        done = subprocess.run(
            [python(), "-m", "tests.procs.replay_history_child", module, str(path)],
            cwd=REPO_ROOT,
            env=child_env(DATABASE_URL=url),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    same = child("tests.e2e.history_workflows", "fresh-1.sqlite3")
    assert same["vendor"] == "sqlite"
    assert same["result"] == EXPECTED
    assert same["file_unchanged"] is True
    assert same["rows_after"] == same["rows_before"]
    assert sum(same["rows_before"].values()) <= 1  # a fresh store: at most its mode row

    changed = child("tests.e2e.history_workflows_v2", "fresh-2.sqlite3")
    assert changed["error"] == {
        "position": 1,
        "recorded": "activity hist.step",
        "new": "activity hist.other",
    }
    assert changed["file_unchanged"] is True
    assert changed["rows_after"] == changed["rows_before"]

    def gate(module: str) -> subprocess.CompletedProcess[str]:
        url = f"sqlite:///{tmp_path / 'never-created.sqlite3'}"
        files = ["--history", str(path), str(path)]
        return subprocess.run(
            [python(), "-m", "tests.procs.worker", module, "weft_replay_check", "--json", *files],
            cwd=REPO_ROOT,
            env=child_env(DATABASE_URL=url),
            capture_output=True,
            text=True,
            timeout=120,
        )

    old = gate("tests.e2e.history_workflows")
    assert old.returncode == 0, old.stderr
    assert json.loads(old.stdout) == {"checked": 2, "skipped": 0, "failures": []}
    new = gate("tests.e2e.history_workflows_v2")
    assert new.returncode == 1, new.stderr
    failures = json.loads(new.stdout)["failures"]
    assert [(f["kind"], f["position"], f["recorded"], f["new"]) for f in failures] == [
        ("non-determinism", 1, "activity hist.step", "activity hist.other")
    ] * 2
    assert "2 history(ies) replayed, 2 finding(s)" in new.stderr
    # Nothing written: no file, or (Django 6.x opens the connection, and the WAL
    # pragma stamps a header page) a file without a single table or row.
    store = tmp_path / "never-created.sqlite3"
    if store.exists():
        with contextlib.closing(sqlite3.connect(store)) as db:
            assert db.execute("SELECT count(*) FROM sqlite_master").fetchone() == (0,)


def _bad_files(tmp_path: Path, document: dict[str, Any]) -> dict[str, tuple[Path, str]]:
    other_version = {**document, "version": 2}
    other_version["checksum"] = checksum_of(other_version)
    edited = json.loads(json.dumps(document))
    edited["journal"][0]["result"] = "step:EDITED"
    text = json.dumps(document, indent=2)
    return {
        "version": (write(tmp_path, other_version, "v2.json"), "format version 2"),
        "truncated": (write(tmp_path, text[: len(text) // 2], "cut.json"), "not valid JSON"),
        "edited": (write(tmp_path, edited, "edited.json"), "checksum 'sha256:"),
        "format": (
            write(tmp_path, {**document, "format": "temporal"}, "fmt.json"),
            "format 'temporal'",
        ),
    }


def test_bad_files_are_refused_naming_the_value(weft_env, tmp_path) -> None:
    completed_run(weft_env)
    bad = _bad_files(tmp_path, export("hist-1"))
    before = row_counts()
    for path, expected in bad.values():
        with pytest.raises(HistoryFormatError, match=expected) as caught:
            replay_history(path)
        assert str(path) in str(caught.value)
        out, err = io.StringIO(), io.StringIO()
        with pytest.raises(CommandError, match=expected) as refused:
            call_command("weft_replay_check", "--history", str(path), stdout=out, stderr=err)
        assert refused.value.returncode == 2
        assert out.getvalue() == ""
    with pytest.raises(HistoryFormatError, match="int"):
        replay_history(42)  # type: ignore[arg-type]
    assert row_counts() == before
