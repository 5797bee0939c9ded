"""The harness's supervisor restarts an engine that died by itself, records
the death as a ``crash`` with the claims it held, leaves a slot the injector
is rebooting (its ``lock`` held) alone, and names the slots still down.
Fakes stand in for the engine processes (no process is started)."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from devtools.chaos.supervisor import Supervisor


class FakeProcess:
    def __init__(self, alive: bool = True) -> None:
        self._alive = alive
        self.killed = False
        self.proc = type("Proc", (), {"returncode": 1})()

    def alive(self) -> bool:
        return self._alive

    def kill(self) -> None:
        self.killed = True


@dataclass
class FakeSlot:
    label: str
    process: Any
    engine_ids: list[str] = field(default_factory=list)
    dead_engine_ids: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    boots: int = 1

    @property
    def engine_id(self) -> str:
        return self.engine_ids[-1]

    def boot(self) -> None:
        self.boots += 1
        self.engine_ids.append(f"{self.label}.{self.boots}")
        self.process = FakeProcess()

    def wait_ready(self) -> None:
        pass


class FakeCluster:
    def __init__(self, *slots: FakeSlot) -> None:
        self.slots = {slot.label: slot for slot in slots}

    def held(self, engine_id: str) -> dict[str, int]:
        return {"chaos-poison-body-0": 4} if engine_id == "chaos-e1.1" else {}


def test_a_dead_engine_is_restarted_and_recorded_a_busy_slot_left_alone() -> None:
    dead = FakeSlot("chaos-e1", FakeProcess(alive=False), ["chaos-e1.1"])
    busy = FakeSlot("chaos-e2", FakeProcess(alive=False), ["chaos-e2.1"])
    live = FakeSlot("chaos-e3", FakeProcess(), ["chaos-e3.1"])
    supervisor = Supervisor(FakeCluster(dead, busy, live))  # type: ignore[arg-type]
    busy.lock.acquire()  # the injector kills and reboots it
    assert supervisor.down() == ["chaos-e1", "chaos-e2"]
    old = dead.process
    for slot in (dead, busy, live):
        supervisor._revive(slot)  # type: ignore[arg-type]
    assert old.killed and dead.engine_id == "chaos-e1.2" and dead.process.alive()
    assert dead.dead_engine_ids == ["chaos-e1.1"]
    assert busy.engine_id == "chaos-e2.1" and live.engine_id == "chaos-e3.1"
    [record] = supervisor.records
    assert (record.kind, record.target, record.engine_id) == ("crash", "chaos-e1", "chaos-e1.1")
    assert record.held == {"chaos-poison-body-0": 4} and record.end_ms >= record.start_ms
    assert "restarted as chaos-e1.2" in record.detail
    assert supervisor.down() == ["chaos-e2"]
    busy.lock.release()
    supervisor._revive(busy)  # type: ignore[arg-type]
    assert supervisor.down() == []


def test_a_restart_waits_out_a_broker_outage() -> None:
    """A Celery node is not ready while the broker is down: one wait's bound
    passing is no reason to give up (nor to fail the soak)."""
    from devtools.procs import WaitTimedOut

    class SlowSlot(FakeSlot):
        waits = 0

        def wait_ready(self) -> None:
            self.waits += 1
            if self.waits < 3:
                raise WaitTimedOut("timed out after 30 s waiting for the node to be ready")

    slot = SlowSlot("chaos-c3", FakeProcess(alive=False), ["chaos-c3-b1"])
    supervisor = Supervisor(FakeCluster(slot))  # type: ignore[arg-type]
    supervisor._revive(slot)  # type: ignore[arg-type]
    assert slot.waits == 3 and [r.target for r in supervisor.records] == ["chaos-c3"]


def test_the_thread_revives_until_stopped() -> None:
    slot = FakeSlot("chaos-e1", FakeProcess(alive=False), ["chaos-e1.1"])
    supervisor = Supervisor(FakeCluster(slot))  # type: ignore[arg-type]
    supervisor.start()
    try:
        from devtools.procs import wait_for

        wait_for("the revival", lambda: supervisor.records, timeout=10)
    finally:
        supervisor.stop()
    assert supervisor.error is None and supervisor.down() == []
