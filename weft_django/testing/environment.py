"""An engine on a fake clock in manual mode, driven explicitly by a test.

Why no pytest here: a unittest project uses ``WeftTestMixin`` without it; the
pytest fixture lives in ``weft_django.testing.pytest_plugin``.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from weft_django.models import JournalEntry, WorkflowRun
from weft_django.testing.clock import FakeClock


class WorkflowTestEnvironment:
    """An engine with a fake clock, driven explicitly."""

    def __init__(self, **overrides: Any) -> None:
        from weft_django.engine import Engine

        self.clock = FakeClock()
        overrides.setdefault("background_tasks", "manual")
        # One engine on a fake clock: no crash to detect, no extra connection.
        overrides.setdefault("session_presence", False)
        self.engine = Engine(clock=self.clock, **overrides).boot()

    def advance(self, duration: timedelta | float) -> None:
        """Move the fake clock; timers now due fire on the next ``run_until_idle``."""
        self.clock.advance(duration)

    def run_until_idle(self, timeout: float = 30.0) -> int:
        return self.engine.run_until_idle(timeout)

    def journal(self, workflow_id: str) -> list[tuple[str, str]]:
        """``[(kind, target), ...]`` of the latest run's journal."""
        run = WorkflowRun.objects.using(self.engine.settings.database).latest_for(workflow_id)
        if run is None:
            raise AssertionError(f"no run of workflow {workflow_id!r}")
        return list(
            JournalEntry.objects.filter(run=run).order_by("position").values_list("kind", "target")
        )

    def assert_journal_kinds(self, workflow_id: str, expected: list[str]) -> None:
        kinds = [kind for kind, _ in self.journal(workflow_id)]
        if kinds != expected:
            raise AssertionError(f"journal of {workflow_id!r} is {kinds}, expected {expected}")

    def close(self) -> None:
        self.engine.dispose(grace=0)


class WeftTestMixin:
    """For ``TransactionTestCase``: ``self.weft`` is a fresh environment per test."""

    weft: WorkflowTestEnvironment

    def setUp(self) -> None:
        super().setUp()  # type: ignore[misc]
        self.weft = WorkflowTestEnvironment()

    def tearDown(self) -> None:
        self.weft.close()
        super().tearDown()  # type: ignore[misc]


__all__ = ["WeftTestMixin", "WorkflowTestEnvironment"]
