"""An update is applied once per ``update_id`` across a SIGKILL of its owner.

Real ``weft_worker`` processes on PostgreSQL (``tests/engines/harness.py``).
The owner is killed while the update's generator handler is between its two
activity steps; a second engine takes the workflow over, replays the
``update`` entry, resumes the handler past the recorded first step and
records the answer. The caller (blocked in ``client.update`` the whole time)
gets that answer; a second call with the same ``update_id`` gets it again
and applies nothing.

Safety is read from durable records (``JournalEntry``, ``UpdateRequest``,
``SideEffect``); every wait is a bounded poll (hang protection only).
"""

from __future__ import annotations

import signal
import threading
from collections import Counter
from typing import Any

import pytest
from django.db import connection

from project.demo.models import SideEffect
from tests.engines.harness import HANG_TIMEOUT_S, Worker, journal, wait_for
from tests.engines.update_workflows import IMPORTS, START
from weft_django import client
from weft_django.errors import UpdateRejected
from weft_django.models import UpdateRequest, WorkflowRun

pytestmark = [pytest.mark.processes]

TTL_PATH = {"WEFT_SESSION_PRESENCE": "0"}  # crash detection by the claim TTL alone
ANSWER_TIMEOUT_S = 90.0


class Caller(threading.Thread):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(daemon=True)
        self.args, self.kwargs = args, kwargs
        self.result: Any = None
        self.error: BaseException | None = None

    def run(self) -> None:
        from django.db import connection as thread_connection

        try:
            self.result = client.update(*self.args, **self.kwargs)
        except BaseException as exc:
            self.error = exc
        finally:
            thread_connection.close()


def _starts() -> Counter[str]:
    return Counter(SideEffect.objects.filter(kind=START).values_list("key", flat=True))


@pytest.mark.django_db(transaction=True)
def test_an_update_is_applied_once_across_a_sigkill_of_its_owner(tmp_path: Any) -> None:
    assert connection.vendor == "postgresql"
    wid = "upd-crash"
    workers: list[Worker] = []
    try:
        first = Worker("upd-w1", tmp_path, env=TTL_PATH, imports=IMPORTS)
        workers.append(first)
        first.wait_booted()
        handle = client.start("procs-update-cart", {"seconds": 1.0}, workflow_id=wid)
        wait_for(
            "the cart to park",
            lambda: WorkflowRun.objects.filter(pk=handle.run_id, status="parked").exists(),
            first,
        )
        with pytest.raises(UpdateRejected):
            client.update(wid, "add", "")
        assert not UpdateRequest.objects.exists()

        caller = Caller(wid, "add", "x", update_id="u-kill", timeout=ANSWER_TIMEOUT_S)
        caller.start()
        # Killed once the handler's first step is recorded (the second in flight).
        wait_for(
            "the handler's first step to be recorded",
            lambda: any(e.kind == "activity" for e in journal(handle.run_id)),
            first,
        )
        first.kill()
        assert first.proc.returncode == -signal.SIGKILL
        kinds = [e.kind for e in journal(handle.run_id)]
        assert "update" in kinds and "update-done" not in kinds, kinds

        second = Worker("upd-w2", tmp_path, env=TTL_PATH, imports=IMPORTS)
        workers.append(second)
        caller.join(ANSWER_TIMEOUT_S + HANG_TIMEOUT_S)
        assert not caller.is_alive(), "the caller never got its answer"
        assert caller.error is None, caller.error
        assert caller.result == {"count": 1, "last": "x:b"}

        # The same update_id: the recorded answer, nothing applied again.
        again = client.update(wid, "add", "x", update_id="u-kill", timeout=ANSWER_TIMEOUT_S)
        assert again == caller.result
        other = client.update(wid, "add", "y", update_id="u-other", timeout=ANSWER_TIMEOUT_S)
        assert other == {"count": 2, "last": "y:b"}
        client.signal(wid, "checkout", None)
        assert handle.result(timeout=ANSWER_TIMEOUT_S) == ["x", "y"]

        entries = journal(handle.run_id)
        done = [e for e in entries if e.kind == "update-done"]
        assert [e.target for e in done] == ["u-kill", "u-other"]
        assert [e.kind for e in entries].count("update") == 2
        assert UpdateRequest.objects.filter(update_id="u-kill").count() == 1
        # The step recorded before the kill never ran again; only the one in
        # flight at the kill may have.
        starts = _starts()
        assert starts["x:a"] == 1 and starts["y:a"] == starts["y:b"] == 1, starts
        assert starts["x:b"] in (1, 2), starts
        # Delivered by the dead owner (epoch 1), answered by the new one (2).
        delivered = next(e for e in entries if e.kind == "update")
        assert (delivered.epoch, done[0].epoch) == (1, 2)
    finally:
        for worker in workers:
            worker.kill()
