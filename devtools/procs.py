"""Child processes for the tests and the benchmarks: spawn, wait, stop, kill.

One copy, because the process tests and the benchmarks spawn the same
children (a standalone ``weft_worker``, a Celery node, a chaos engine) and
must stop or kill each one as a whole: a Celery node is a main process plus
pool children, so every child leads its own process group. Waiting polls an
observable condition with a bound that is hang protection only, and fails at
once, with the logs, when a child it depends on exits.

Framework-free on purpose (no pytest, no Django at import): ``tests.support``
turns the two failures into ``pytest.fail``; the benchmarks let them raise.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent


def python() -> str:
    """The interpreter of this process (the venv's), for children."""
    return sys.executable


def child_env(database_url: str, **extra: str) -> dict[str, str]:
    """This environment, on ``database_url``, importing this checkout first."""
    env = dict(os.environ)
    env["DATABASE_URL"] = database_url
    env["PYTHONPATH"] = str(REPO_ROOT)
    env.update(extra)
    return env


def database_url(connection: Any) -> str:
    """The ``DATABASE_URL`` of a Django connection (under pytest: the *test* database)."""
    settings = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{Path(settings['NAME']).resolve()}"
    return f"postgres://{settings['USER']}@{settings['HOST']}:{settings['PORT']}/{settings['NAME']}"


class ChildGroup:
    """A child process leading its own process group, its output in a log file.

    ``capture_stdout``: stdout is read into ``lines`` (stderr still goes to
    the log), for children that report on stdout. ``term_main_only``:
    ``terminate``/``stop`` send SIGTERM to the main process alone (a Celery
    node's warm shutdown drains its pool; a SIGTERM to the pool children as
    well would make it a cold one).
    """

    #: Hang protection for reaping a stopped or killed group, never a performance bound.
    reap_timeout_s: float = 30.0

    def __init__(
        self,
        command: Sequence[str],
        log_path: Path,
        env: dict[str, str],
        *,
        cwd: Path = REPO_ROOT,
        capture_stdout: bool = False,
        term_main_only: bool = False,
    ) -> None:
        self.log_path = log_path
        self.term_main_only = term_main_only
        self.lines: list[str] = []
        self._terminated = False
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with log_path.open("w") as log:
            self.proc = subprocess.Popen(
                list(command),
                cwd=cwd,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE if capture_stdout else log,
                stderr=log if capture_stdout else subprocess.STDOUT,
                text=True,
                start_new_session=True,  # its own process group, stopped and killed as a whole
            )
        self._reader: threading.Thread | None = None
        if capture_stdout:
            self._reader = threading.Thread(target=self._read, daemon=True)
            self._reader.start()

    @property
    def name(self) -> str:
        return self.log_path.stem

    @property
    def pid(self) -> int:
        return self.proc.pid

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def output_json(self) -> dict[str, Any] | None:
        """The last captured stdout line that parses as a JSON object."""
        if self._reader is not None:
            self._reader.join(timeout=self.reap_timeout_s)
        for line in reversed(self.lines):
            with contextlib.suppress(ValueError):
                value = json.loads(line)
                if isinstance(value, dict):
                    return value
        return None

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def alive(self) -> bool:
        return self.proc.poll() is None

    def signal_group(self, signum: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signum)

    def terminate(self) -> None:
        """SIGTERM without waiting (to stop several children at once), sent once."""
        if self.proc.poll() is None and not self._terminated:
            self._terminated = True
            if self.term_main_only:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(self.proc.pid, signal.SIGTERM)
            else:
                self.signal_group(signal.SIGTERM)

    def stop(self, timeout: float = 20.0) -> int | None:
        """SIGTERM, wait up to ``timeout`` s, then SIGKILL the group; the exit code."""
        if self.proc.poll() is None:
            self.terminate()
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        if self.term_main_only:
            self.signal_group(signal.SIGKILL)  # leftovers of the group, if any
        if self._reader is not None:
            # The child has exited: ``lines`` holds all it wrote once the reader
            # has read the pipe to its end.
            self._reader.join(timeout=self.reap_timeout_s)
        return self.proc.returncode

    def kill(self) -> None:
        """SIGKILL the whole group (a stopped group dies too), then reap."""
        self.signal_group(signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=self.reap_timeout_s)


class ChildExited(RuntimeError):
    """A child that a wait depended on exited meanwhile (the message has its log)."""


class WaitTimedOut(TimeoutError):
    """The condition did not hold within the hang bound (the message has the logs)."""


def wait_for(
    what: str,
    probe: Callable[[], Any],
    *children: ChildGroup,
    timeout: float = 30.0,
    interval: float = 0.02,
    log_tail: int = 20_000,
) -> Any:
    """Poll ``probe`` until it returns something truthy, and return that.

    ``timeout`` is hang protection only. Raises ``ChildExited`` at once if one
    of ``children`` exits meanwhile, ``WaitTimedOut`` after ``timeout`` s.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        for child in children:
            code = child.proc.poll()
            if code is not None:
                raise ChildExited(
                    f"{child.name} exited {code} waiting for {what}:\n{child.log()[-log_tail:]}"
                )
        if time.monotonic() > deadline:
            logs = "\n".join(f"--- {c.name}\n{c.log()[-log_tail:]}" for c in children)
            raise WaitTimedOut(f"timed out after {timeout} s waiting for {what}\n{logs}")
        time.sleep(interval)


def celery_worker_command(
    node: str,
    *,
    pool: str = "prefork",
    concurrency: int = 2,
    loglevel: str = "INFO",
    imports: Sequence[str] = (),
    heartbeat: bool = True,
) -> list[str]:
    """``celery -A project worker`` for one weft node named ``node`` (``name@host``).

    ``imports``: the workflow modules every process of the node loads (``-I``).
    Mingle and gossip are off: cluster chatter no weft node needs.
    """
    command = [python(), "-m", "celery", "-A", "project", "worker", "-n", node]
    command += ["-P", pool, "-c", str(concurrency), "-l", loglevel]
    command += ["-I", ",".join(imports)] if imports else []
    command += ["--without-mingle", "--without-gossip"]
    return command + ([] if heartbeat else ["--without-heartbeat"])


__all__ = [
    "REPO_ROOT",
    "ChildExited",
    "ChildGroup",
    "WaitTimedOut",
    "celery_worker_command",
    "child_env",
    "database_url",
    "python",
    "wait_for",
]
