"""Shared helpers for the tests: a manual clock, a minimal OwnershipHost, and
``ChildGroup``, the one way the process tests spawn a child (a standalone
``weft_worker``, a Celery node, a chaos engine) in its own process group."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.db import connection

from weft_django.conf import OwnershipMode, WeftSettings, get_settings
from weft_django.ownership.lease import GlobalLeaseManager
from weft_django.ownership.metrics import ClaimMetrics
from weft_django.ownership.registry import ClaimRegistry

REPO_ROOT = Path(__file__).resolve().parent.parent


class ManualClock:
    """An integer-ms clock that only moves when told to."""

    def __init__(self, start: int = 1_000_000) -> None:
        self.now = start

    def __call__(self) -> int:
        return self.now

    def advance(self, ms: int) -> int:
        self.now += ms
        return self.now


@dataclass
class StaticHost:
    """Just enough of an engine for the ownership package."""

    engine_id: str
    clock: ManualClock
    ownership: OwnershipMode = "workflow-lease"
    settings: WeftSettings = field(default_factory=get_settings)
    metrics: ClaimMetrics = field(default_factory=ClaimMetrics)
    registry: ClaimRegistry | None = None
    lease: GlobalLeaseManager | None = None
    uses_injected_clock: bool = True

    def __post_init__(self) -> None:
        if self.ownership == "workflow-lease" and self.registry is None:
            self.registry = ClaimRegistry(
                engine_id=self.engine_id,
                clock=self.clock,
                claim_ttl_ms=self.settings.claim_ttl_ms,
                claim_renew_interval_ms=self.settings.claim_renew_interval_ms,
                using=self.settings.database,
                metrics=self.metrics,
            )

    def now_ms(self) -> int:
        return self.clock()


def child_env(**extra: str) -> dict[str, str]:
    """Environment for a child process that must use the *test* database."""
    env = dict(os.environ)
    settings = connection.settings_dict
    if connection.vendor == "sqlite":
        env["DATABASE_URL"] = f"sqlite:///{Path(settings['NAME']).resolve()}"
    else:
        env["DATABASE_URL"] = (
            f"postgres://{settings['USER']}@{settings['HOST']}:{settings['PORT']}/{settings['NAME']}"
        )
    env["PYTHONPATH"] = str(REPO_ROOT)
    env.update(extra)
    return env


def python() -> str:
    return sys.executable


def as_dict(obj: Any) -> dict[str, Any]:
    return dict(vars(obj))


class ChildGroup:
    """A child process leading its own process group, output to a log file.

    Why a group: a Celery node is a main process plus pool children, and a
    stopped or killed engine must be stopped or killed as a whole; tests kill
    every group in a ``finally`` before the database is flushed.
    """

    #: Hang protection for reaping a killed group, never a performance bound.
    reap_timeout_s: float = 30.0

    def __init__(self, command: Sequence[str], log_path: Path, env: dict[str, str]) -> None:
        self.log_path = log_path
        with log_path.open("w") as log:
            self.proc = subprocess.Popen(
                list(command),
                cwd=REPO_ROOT,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group, killed as a whole
            )

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def alive(self) -> bool:
        return self.proc.poll() is None

    def signal_group(self, signum: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signum)

    def kill(self) -> None:
        """SIGKILL the whole group (a stopped group dies too), then reap."""
        self.signal_group(signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=self.reap_timeout_s)


def wait_for(
    what: str,
    probe: Callable[[], Any],
    *children: ChildGroup,
    timeout: float = 30.0,
    interval: float = 0.02,
) -> Any:
    """Poll ``probe`` until it returns something truthy; hang protection only.

    Fails at once, with its log, if one of ``children`` exits meanwhile.
    """
    import pytest

    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        for child in children:
            code = child.proc.poll()
            if code is not None:
                name = child.log_path.stem
                pytest.fail(f"{name} exited {code} waiting for {what}:\n{child.log()}")
        if time.monotonic() > deadline:
            logs = "\n".join(f"--- {c.log_path.stem}\n{c.log()[-20_000:]}" for c in children)
            pytest.fail(f"timed out waiting for {what}\n{logs}")
        time.sleep(interval)
