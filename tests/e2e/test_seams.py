"""The runtime's seams: wake backends (``announce``), the scheduler, force release's rule."""

from __future__ import annotations

from collections.abc import Iterator
from typing import ClassVar

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.db import connection, transaction
from django.test import override_settings

from tests.e2e.helpers import latest
from weft_django import client, workflow
from weft_django.apps import install_wake_backends
from weft_django.engine import Engine
from weft_django.engine.scheduling.local import LocalScheduler
from weft_django.engine.wakes import Wake, WakeBackend, backends
from weft_django.models import EngineRecord, WorkflowClaim
from weft_django.transports.notify import NotifyBackend
from weft_django.transports.polling import PollingBackend


@workflow(name="seam-wait")
def seam_wait(ctx, data):
    return (yield ctx.wait_for_signal("go"))


class Recording(WakeBackend):
    name: ClassVar[str] = "recording"

    def __init__(self) -> None:
        self.wakes: list[Wake] = []

    def deliver(self, wake: Wake) -> None:
        self.wakes.append(wake)


@pytest.fixture
def recording() -> Iterator[Recording]:
    backend = Recording()
    backends.install(backend)
    try:
        yield backend
    finally:
        backends.uninstall(Recording)


def test_the_notify_backend_is_installed_at_ready() -> None:
    assert any(isinstance(b, NotifyBackend) for b in backends.all())


@pytest.mark.parametrize(
    ("value", "named"),
    [
        (("no.such.module.Backend",), "no.such.module.Backend"),
        (("weft_django.models.WorkflowRun",), "weft_django.models.WorkflowRun"),
        ("weft_django.transports.notify.NotifyBackend", "list of dotted paths"),
    ],
)
def test_a_bad_wake_backend_path_is_improperly_configured(value: object, named: str) -> None:
    with pytest.raises(ImproperlyConfigured, match=named.replace(".", r"\.")):
        install_wake_backends(value)


def test_installing_twice_keeps_one_instance_per_class() -> None:
    before = backends.all()
    install_wake_backends(("weft_django.transports.polling.PollingBackend",) * 2)
    try:
        assert sum(isinstance(b, PollingBackend) for b in backends.all()) == 1
    finally:
        backends.uninstall(PollingBackend)
    assert backends.all() == before


@pytest.mark.django_db(transaction=True)
def test_a_wake_is_delivered_once_committed_and_never_after_a_rollback(
    recording: Recording,
) -> None:
    with transaction.atomic():
        handle = client.start("seam-wait", None, workflow_id="seam-commit")
        assert recording.wakes == []  # not before the commit
    assert [(w.event, w.run_id, w.workflow_id) for w in recording.wakes] == [
        ("start", handle.run_id, "seam-commit")
    ]
    recording.wakes.clear()
    with pytest.raises(RuntimeError), transaction.atomic():
        client.start("seam-wait", None, workflow_id="seam-rolled-back")
        raise RuntimeError("roll back")
    assert recording.wakes == []


@pytest.mark.django_db(transaction=True)
def test_signal_stop_and_force_release_each_announce(recording: Recording, clock) -> None:
    engine = Engine(clock=clock, background_tasks="manual").boot()
    try:
        handle = client.start("seam-wait", None, workflow_id="seam-ops")
        engine.run_until_idle()
        recording.wakes.clear()
        client.signal("seam-ops", "other", 1)
        epoch = client.force_release("seam-ops")
        assert WorkflowClaim.objects.get(pk="seam-ops").epoch == epoch
        client.cancel("seam-ops")
    finally:
        engine.dispose(grace=0)
    assert [(w.event, w.run_id) for w in recording.wakes] == [
        ("signal", handle.run_id),
        ("released", handle.run_id),
        ("finished", handle.run_id),
    ]
    assert latest("seam-ops").status == "cancelled"


@pytest.mark.django_db(transaction=True)
def test_force_release_is_refused_outside_workflow_lease() -> None:
    client.start("seam-wait", None, workflow_id="seam-none")
    with (
        override_settings(WEFT={"OWNERSHIP": "none"}),
        pytest.raises(ImproperlyConfigured, match='"workflow-lease" only'),
    ):
        client.force_release("seam-none")
    assert not WorkflowClaim.objects.filter(pk="seam-none").exists()


@pytest.mark.django_db(transaction=True)
def test_wait_done_returns_on_the_runs_finished_wake(clock) -> None:
    backend = NotifyBackend()
    if connection.vendor != "postgresql":
        assert not backend.available("default")
        return
    engine = Engine(clock=clock, background_tasks="manual").boot()
    try:
        handle = client.start("seam-wait", None, workflow_id="seam-done")
        engine.run_until_idle()
        assert not backend.wait_done("default", handle.run_id, 0.2)  # still parked
        client.signal("seam-done", "go", 7)
        engine.run_until_idle()
        assert handle.result(timeout=5) == 7
    finally:
        engine.dispose(grace=0)


class _NamedScheduler(LocalScheduler):
    node_name = "node-a"
    pool_name = "prefork"


@pytest.mark.django_db(transaction=True)
def test_the_scheduler_names_where_turns_run(clock) -> None:
    scheduler = _NamedScheduler(listens=False)
    engine = Engine(
        engine_id="seam-engine", clock=clock, scheduler=scheduler, background_tasks="manual"
    )
    assert engine.scheduler is scheduler and scheduler.engine is engine
    engine.boot()
    try:
        record = EngineRecord.objects.get(pk="seam-engine")
        assert (record.node_name, record.pool) == ("node-a", "prefork")
        client.start("seam-wait", None, workflow_id="seam-sched")
        engine.run_until_idle()
        assert latest("seam-sched").status == "parked"
        assert engine.inflight == 0 and not engine.background
    finally:
        engine.dispose(grace=0)


@pytest.mark.django_db(transaction=True)
def test_result_subscribes_before_the_read_it_blocks_on(monkeypatch) -> None:
    """A finish committed after ``result()``'s read must not be missed: it
    subscribes first, then reads the row, and only then waits (one read
    before the wait, not two)."""
    from weft_django import client as client_module
    from weft_django.engine.wakes import DoneWaiter
    from weft_django.models import WorkflowRun

    handle = client.start("seam-wait", None, workflow_id="seam-result")
    steps: list[str] = []
    real_run = client_module.WorkflowHandle._run

    def reading(self):
        steps.append("read")
        return real_run(self)

    class Waiter(DoneWaiter):
        def wait(self, timeout: float) -> bool:
            steps.append("wait")
            WorkflowRun.objects.filter(pk=handle.run_id).update(status="completed", result=7)
            return True

        def close(self) -> None:
            steps.append("close")

    def done_waiter(using: str, run_id: str) -> DoneWaiter:
        assert run_id == str(handle.run_id)
        steps.append("subscribe")
        return Waiter()

    monkeypatch.setattr(client_module.WorkflowHandle, "_run", reading)
    monkeypatch.setattr(backends, "done_waiter", done_waiter)
    assert handle.result(timeout=5) == 7
    assert steps == ["subscribe", "read", "wait", "read", "close"]
