"""A test kit for your own workflows (SPEC §6): no sleeping, no workers.

``WorkflowTestEnvironment`` gives an ``Engine`` on a fake clock in manual
mode: start workflows with ``client``, call ``run_until_idle()`` to drive
every ready turn, ``advance(timedelta)`` to move time (timers fire on the
next ``run_until_idle``), and assert on journals. Use it through the pytest
fixture ``weft_env`` (add ``pytest_plugins = ["weft_django.testing"]`` to
your ``conftest.py``) or the ``WeftTestMixin`` for ``TestCase`` classes.
Tests need the database (``@pytest.mark.django_db(transaction=True)``).

Why a package: pytest is imported only by ``pytest_plugin`` (the fixture),
so a unittest project can import ``WeftTestMixin`` without pytest installed.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from weft_django.durations import to_ms
from weft_django.models import JournalEntry, WorkflowRun

#: pytest loads the fixture module when a project names this package in its
#: own ``pytest_plugins``; nothing here imports pytest.
pytest_plugins = ["weft_django.testing.pytest_plugin"]


class FakeClock:
    """An integer-ms clock that moves only when told to: the engine clock of tests.

    Callable like every engine clock (``Clock`` in ``weft_django.clock``);
    ``now`` is the current value and may be assigned directly.
    """

    def __init__(self, start_ms: int = 1_700_000_000_000) -> None:
        self.now = int(start_ms)

    def __call__(self) -> int:
        return self.now

    def advance(self, duration: timedelta | float) -> int:
        """Move forward by ``duration`` (a ``timedelta`` or seconds); returns the new ms."""
        return self.advance_ms(to_ms(duration, "FakeClock.advance duration"))

    def advance_ms(self, ms: int) -> int:
        """Move by ``ms`` integer milliseconds (negative moves back); returns the new ms."""
        self.now += int(ms)
        return self.now

    def set_ms(self, ms: int) -> int:
        """Jump to ``ms``; returns it."""
        self.now = int(ms)
        return self.now


class WorkflowTestEnvironment:
    """An engine with a fake clock, driven explicitly."""

    def __init__(self, **overrides: Any) -> None:
        from weft_django.engine import Engine

        self.clock = FakeClock()
        overrides.setdefault("background_tasks", "manual")
        self.engine = Engine(clock=self.clock, **overrides).boot()

    def advance(self, duration: timedelta | float) -> None:
        """Move the fake clock; timers now due fire on the next ``run_until_idle``."""
        self.clock.advance(duration)

    def run_until_idle(self, timeout: float = 30.0) -> int:
        return self.engine.run_until_idle(timeout)

    def journal(self, workflow_id: str) -> list[tuple[str, str]]:
        """``[(kind, target), ...]`` of the latest run's journal."""
        run = WorkflowRun.objects.filter(workflow_id=workflow_id).order_by("-created_at").first()
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


def __getattr__(name: str) -> Any:
    """``from weft_django.testing import weft_env`` still works, importing pytest only then."""
    if name == "weft_env":
        from weft_django.testing.pytest_plugin import weft_env

        return weft_env
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["FakeClock", "WeftTestMixin", "WorkflowTestEnvironment"]
