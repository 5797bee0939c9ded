"""The harness's supervisor: an engine that dies by itself is restarted.

Why: a poison run (``devtools.chaos.flows``) exits the process of every
engine that drives it, until the product contains it (a failed activity, a
``CrashLoopError``). A fleet whose dead stay dead would lose the soak's
runs for a reason that is not the product's; a deployment restarts its
engines, and so does the harness. Each death is recorded as a ``crash``
``FaultRecord`` (the claims its engine held, when it was seen, when its
successor was booted) so the audit explains what a crash explains, like a
``kill``. An engine may also die of something else (a Celery node that
gives up on its broker during an outage): it is restarted the same way.
The slot's ``lock`` keeps the injector's own kill-and-reboot and
this one apart. ``down()`` names the slots whose engine is not running:
the audit's ``engines_down`` once every run finished.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from typing import TYPE_CHECKING

from django.db import DatabaseError, connection

from devtools.chaos.injector import FaultRecord
from devtools.procs import WaitTimedOut
from weft_django.kernel.clock import wall_ms

if TYPE_CHECKING:
    from devtools.chaos.harness import Cluster, Slot

logger = logging.getLogger("devtools.chaos")

#: How often the supervisor looks for a dead engine.
INTERVAL_S = 0.1
#: Hang protection of one restart (a broker outage lasts up to 30 s).
REVIVE_TIMEOUT_S = 300.0


class Supervisor:
    """Restarts the cluster's dead engines on its own thread until ``stop``."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.records: list[FaultRecord] = []
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="chaos-supervisor", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float = 120.0) -> None:
        """Stop looking (a revival under way finishes first)."""
        self._stop.set()
        self._thread.join(timeout)

    def down(self) -> list[str]:
        return [
            slot.label
            for slot in self.cluster.slots.values()
            if slot.process is None or not slot.process.alive()
        ]

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                for slot in self.cluster.slots.values():
                    if self._stop.is_set():
                        break
                    if slot.process is not None and not slot.process.alive():
                        self._revive(slot)
                self._stop.wait(INTERVAL_S)
        except BaseException as exc:  # reported by the harness, never swallowed
            self.error = exc
        finally:
            connection.close()

    def _revive(self, slot: Slot) -> None:
        if not slot.lock.acquire(blocking=False):
            return  # the injector is killing and rebooting it
        try:
            process = slot.process
            if process is None or process.alive():
                return
            engine_id = slot.engine_id
            start = wall_ms()
            process.kill()  # reap, and whatever of its group is left
            held = self._held(engine_id)
            record = FaultRecord("crash", slot.label, engine_id, start, held=held)
            if engine_id not in slot.dead_engine_ids:
                slot.dead_engine_ids.append(engine_id)
            slot.boot()
            record.end_ms = wall_ms()
            self._wait_ready(slot)
            record.detail = (
                f"exited {process.proc.returncode}; held {len(held)}; restarted as {slot.engine_id}"
            )
            self.records.append(record)
            logger.info("engine %s of %s died: %s", engine_id, slot.label, record.detail)
        finally:
            slot.lock.release()

    def _wait_ready(self, slot: Slot) -> None:
        """Wait for the fresh engine, through a database restart (its reads
        fail) and a broker outage (a Celery node is not ready until the broker
        is back: longer than one wait's bound); at most ``REVIVE_TIMEOUT_S``."""
        deadline = time.monotonic() + REVIVE_TIMEOUT_S
        while True:
            try:
                slot.wait_ready()
                return
            except (DatabaseError, WaitTimedOut):
                if time.monotonic() > deadline:
                    raise
                with contextlib.suppress(DatabaseError):
                    connection.close()
                time.sleep(1.0)

    def _held(self, engine_id: str) -> dict[str, int]:
        """Its claims, read again on a fresh connection while the server restarts."""
        for attempt in range(20):
            try:
                return self.cluster.held(engine_id)
            except DatabaseError:
                with contextlib.suppress(DatabaseError):
                    connection.close()
                time.sleep(0.5 * (attempt + 1))
        return {}


__all__ = ["INTERVAL_S", "Supervisor"]
