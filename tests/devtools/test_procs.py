"""devtools.procs: the one way tests and benchmarks spawn, wait on and stop children."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from devtools.procs import (
    ChildExited,
    ChildGroup,
    WaitTimedOut,
    celery_worker_command,
    child_env,
    python,
    wait_for,
)

pytestmark = [pytest.mark.processes]

SLEEPER = (
    "import sys, time; print('up', flush=True); print('err', file=sys.stderr, flush=True); "
    "time.sleep(120)"
)


def spawn(tmp_path: Path, code: str, **options: bool) -> ChildGroup:
    return ChildGroup([python(), "-c", code], tmp_path / "child.log", dict(os.environ), **options)


def test_a_child_leads_its_own_group_and_is_killed_as_a_whole(tmp_path: Path) -> None:
    child = spawn(tmp_path, SLEEPER)
    try:
        assert wait_for("the child to start", lambda: "up" in child.log(), child, timeout=30)
        assert os.getpgid(child.pid) == child.pid
        assert "err" in child.log() and child.name == "child" and child.alive()
    finally:
        child.kill()
    assert not child.alive() and child.proc.returncode == -signal.SIGKILL


def test_a_wait_fails_at_once_with_the_log_when_its_child_exits(tmp_path: Path) -> None:
    child = spawn(tmp_path, "print('boom', flush=True); raise SystemExit(3)")
    with pytest.raises(ChildExited, match=r"child exited 3 waiting for never(.|\n)*boom"):
        wait_for("never", lambda: False, child, timeout=60)


def test_a_wait_times_out_with_the_logs(tmp_path: Path) -> None:
    child = spawn(tmp_path, SLEEPER)
    try:
        wait_for("the child to start", lambda: "up" in child.log(), child, timeout=30)
        with pytest.raises(WaitTimedOut, match=r"waiting for never\n--- child\nup"):
            wait_for("never", lambda: False, child, timeout=0.1)
    finally:
        child.kill()


def test_captured_stdout_and_its_last_json_line(tmp_path: Path) -> None:
    code = "print('ready', flush=True); print('{\"n\": 1}'); print('{\"n\": 2}'); print('[3]')"
    child = spawn(tmp_path, code, capture_stdout=True)
    wait_for("the child to finish", lambda: not child.alive(), timeout=30)
    assert child.stop() == 0
    assert child.lines[0] == "ready"
    assert child.output_json() == {"n": 2}


def test_stop_is_sigterm_then_the_exit_code(tmp_path: Path) -> None:
    child = spawn(tmp_path, SLEEPER, term_main_only=True)
    wait_for("the child to start", lambda: "up" in child.log(), child, timeout=30)
    assert child.stop(timeout=30) == -signal.SIGTERM


def test_child_env_points_at_the_database_and_this_checkout() -> None:
    env = child_env("sqlite:///x.sqlite3", EXTRA="1")
    assert env["DATABASE_URL"] == "sqlite:///x.sqlite3" and env["EXTRA"] == "1"
    assert Path(env["PYTHONPATH"]) == Path(__file__).resolve().parents[2]


def test_the_celery_worker_command() -> None:
    command = celery_worker_command("n@h", imports=["a", "b"], heartbeat=False)
    assert command[1:] == [
        *("-m", "celery", "-A", "project", "worker", "-n", "n@h", "-P", "prefork", "-c", "2"),
        *("-l", "INFO", "-I", "a,b", "--without-mingle", "--without-gossip"),
        "--without-heartbeat",
    ]
