"""Shared helpers for the tests: the suite's clock, a minimal OwnershipHost,
and the process helpers of ``devtools.procs`` with pytest failures.

``ChildGroup`` is the one way the process tests spawn a child (a standalone
``weft_worker``, a Celery node, a chaos engine) in its own process group;
``wait_for`` fails the test (``pytest.fail``) with the children's logs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from django.db import connection

from devtools import procs
from devtools.procs import REPO_ROOT, ChildGroup, python
from weft_django.conf import OwnershipMode, WeftSettings, get_settings
from weft_django.ownership.lease import GlobalLeaseManager
from weft_django.ownership.metrics import ClaimMetrics
from weft_django.ownership.registry import ClaimRegistry
from weft_django.testing import FakeClock


class ManualClock(FakeClock):
    """``FakeClock`` as the suite has always spelled it: ``advance(ms)`` moves by integer
    milliseconds (``FakeClock.advance`` takes seconds) and the default start is 1 000 000."""

    def __init__(self, start: int = 1_000_000) -> None:
        super().__init__(start_ms=start)

    def advance(self, ms: int) -> int:  # type: ignore[override]
        return self.advance_ms(ms)


@dataclass
class StaticHost:
    """Just enough of an engine for the ownership package."""

    engine_id: str
    clock: FakeClock
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
    return procs.child_env(procs.database_url(connection), **extra)


def wait_for(
    what: str,
    probe: Callable[[], Any],
    *children: ChildGroup,
    timeout: float = 30.0,
    interval: float = 0.02,
) -> Any:
    """``devtools.procs.wait_for``, failing the test with the children's logs."""
    try:
        return procs.wait_for(what, probe, *children, timeout=timeout, interval=interval)
    except (procs.ChildExited, procs.WaitTimedOut) as failure:
        pytest.fail(str(failure))


__all__ = [
    "REPO_ROOT",
    "ChildGroup",
    "ManualClock",
    "StaticHost",
    "child_env",
    "db_session_id",
    "python",
    "wait_for",
]


def db_session_id() -> Any:
    """This thread's database session: the connection object and, on
    PostgreSQL, its backend pid (the same pair means the same session)."""
    from django.db import connection

    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SELECT pg_backend_pid()")
        else:
            cursor.execute("SELECT 1")
        value = cursor.fetchone()[0]
    return (id(connection.connection), value)


def type_label_is_bounded(key: str, value: str) -> bool:
    """A business-metric label value that is bounded: a registered workflow or
    activity name (or ``"other"``), an activity attempt outcome, a bucket bound."""
    from weft_django.engine.workflow.definitions import registry
    from weft_django.metrics.business import ACTIVITY_ATTEMPT_OUTCOMES, OTHER

    if key == "le":
        return value == "+Inf" or value.replace(".", "", 1).isdigit()
    if key == "workflow":
        return value == OTHER or value in registry.workflows
    if key == "activity":
        return value == OTHER or value in registry.activities
    return key == "outcome" and value in ACTIVITY_ATTEMPT_OUTCOMES
