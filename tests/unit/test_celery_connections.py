"""``keep_connections_for_weft_tasks``: weft tasks keep their connection.

Why: Celery's Django fix-up closes every database connection around every
task, so each weft turn in a pool process opened a new PostgreSQL session
(milliseconds per wake). The patch must spare ``weft.*`` tasks only: any other task is
still closed around exactly as before.
"""

from __future__ import annotations

from typing import Any

import pytest
from celery import Celery
from celery._state import _task_stack

from weft_django.transports import celery as weft_celery
from weft_django.transports.celery import fixup


class _FakeWorkerFixup:
    def __init__(self) -> None:
        self.closed = 0

    def close_database(self, **kwargs: Any) -> None:
        self.closed += 1


class _FakeFixup:
    def __init__(self) -> None:
        self._worker_fixup = _FakeWorkerFixup()


class _Task:
    def __init__(self, name: str) -> None:
        self.name = name


@pytest.fixture
def app_with_fixup() -> tuple[Celery, _FakeWorkerFixup]:
    app = Celery("weft-test-connections", set_as_current=False)
    fixup = _FakeFixup()
    app._fixups = [fixup]
    return app, fixup._worker_fixup


def _close_while_running(worker_fixup: _FakeWorkerFixup, task_name: str) -> None:
    _task_stack.push(_Task(task_name))
    try:
        worker_fixup.close_database()
    finally:
        _task_stack.pop()


def test_weft_tasks_keep_their_connection_and_other_tasks_do_not(
    app_with_fixup: tuple[Celery, _FakeWorkerFixup], monkeypatch: pytest.MonkeyPatch
) -> None:
    app, worker_fixup = app_with_fixup
    refreshed: list[bool] = []
    monkeypatch.setattr(
        "weft_django.engine.db_connections.refresh_connections", lambda: refreshed.append(True)
    )
    assert weft_celery.keep_connections_for_weft_tasks(app)
    _close_while_running(worker_fixup, "weft.drive")
    _close_while_running(worker_fixup, "weft.pickup")
    assert worker_fixup.closed == 0 and len(refreshed) == 2  # kept, checked for health
    _close_while_running(worker_fixup, "myapp.send_invoice")
    worker_fixup.close_database()  # no task running (worker start, beat)
    assert worker_fixup.closed == 2
    assert weft_celery.keep_connections_for_weft_tasks(app)  # idempotent: not wrapped twice
    _close_while_running(worker_fixup, "myapp.send_invoice")
    assert worker_fixup.closed == 3


def test_without_the_django_fixup_nothing_is_patched() -> None:
    app = Celery("weft-test-no-fixup", set_as_current=False)
    app._fixups = []
    assert not weft_celery.keep_connections_for_weft_tasks(app)


def test_the_patched_fixup_is_the_one_of_a_checked_celery_release() -> None:
    """The patch reaches into Celery's private Django fix-up: an upgrade must
    re-check it (then add the release to ``fixup.CHECKED_CELERY``)."""
    import celery
    from celery.fixups.django import DjangoFixup

    assert ".".join(celery.__version__.split(".")[:2]) in fixup.CHECKED_CELERY, celery.__version__
    app = Celery("weft-test-real-fixup", set_as_current=False)
    django_fixup = DjangoFixup(app)
    worker_fixup = django_fixup.worker_fixup  # what a worker's init builds
    assert django_fixup._worker_fixup is worker_fixup  # the private path the patch reads
    app._fixups = [django_fixup]
    assert weft_celery.keep_connections_for_weft_tasks(app)
    assert worker_fixup._weft_keeps_connections  # type: ignore[attr-defined]
