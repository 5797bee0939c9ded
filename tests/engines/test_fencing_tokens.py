"""A stale owner's late write to an application row is refused (issue #17 part 2).

Real ``weft_worker`` processes on PostgreSQL (``tests/engines/harness.py``,
TTL 3 s, renew 1 s). Engine A runs ``fencing_deposit`` (balance += 10
through ``fenced_update``) and is stopped (SIGSTOP) inside the activity,
before its write. Engine B takes the claim over after expiry, runs the step
again at a newer epoch: its deposit applies and the workflow completes under
B. A is continued (SIGCONT): its activity wakes and writes at the old epoch,
and that write is refused -- the row keeps B's value and B's fence, so the
deposit counted once although the step ran twice.
"""

from __future__ import annotations

import signal

import pytest
from django.db import connection

from project.demo.models import FencedAccount, SideEffect
from tests.engines.fencing_workflows import APPLIED, IMPORTS, REFUSED, STARTED
from tests.engines.harness import HANG_TIMEOUT_S, Worker, events_of, kill_all, wait_for
from weft_django import client

pytestmark = [pytest.mark.processes]

PAUSE_S = "8"  # A's sleep before its write: it outlasts the takeover (hang-bounded below)


def _effects(kind: str) -> list[str]:
    return sorted(SideEffect.objects.filter(kind=kind).values_list("key", flat=True))


@pytest.mark.django_db(transaction=True)
def test_a_paused_owners_late_write_is_refused_after_a_takeover(tmp_path):
    if connection.vendor != "postgresql":
        pytest.skip("SIGSTOP of an engine is a PostgreSQL process test")
    FencedAccount.objects.create(name="acct", balance=100)
    workers: list[Worker] = []
    try:
        a = Worker(
            "fence-a",
            tmp_path,
            env={"FENCE_PAUSE_S": PAUSE_S, "FENCE_WRITER": "fence-a"},
            imports=IMPORTS,
        )
        workers.append(a)
        a.wait_booted()
        handle = client.start("fencing-deposit", {"account": "acct"}, workflow_id="fence-1")
        (first,) = wait_for("A to start the activity", lambda: _effects(STARTED), a)
        a.signal_group(signal.SIGSTOP)  # inside its sleep, before its write
        first_epoch = int(first.rsplit(":", 1)[1])
        b = Worker(
            "fence-b",
            tmp_path,
            env={"FENCE_PAUSE_S": "0", "FENCE_WRITER": "fence-b"},
            imports=IMPORTS,
        )
        workers.append(b)
        b.wait_booted()
        result = handle.result(timeout=HANG_TIMEOUT_S * 2)
        second_epoch = int(result.rsplit(":", 1)[1])
        assert second_epoch > first_epoch
        takeover = [e for e in events_of("fence-1") if e.kind == "takeover"]
        assert [(e.engine_id, e.epoch) for e in takeover] == [("fence-b", second_epoch)]
        assert _effects(APPLIED) == [f"acct:{second_epoch}"]
        row = FencedAccount.objects.get(name="acct")
        assert (row.balance, row.writer, row.fence_workflow_id, row.fence_epoch) == (
            110,
            "fence-b",
            "fence-1",
            second_epoch,
        )
        a.signal_group(signal.SIGCONT)
        refused = wait_for("A's late write to be refused", lambda: _effects(REFUSED), a, b)
        assert refused == [f"acct:{first_epoch}"]
        assert _effects(APPLIED) == [f"acct:{second_epoch}"]
        row.refresh_from_db()
        # The row keeps the new owner's value and fence: the deposit counted once.
        assert (row.balance, row.writer, row.fence_epoch) == (110, "fence-b", second_epoch)
        assert _effects(STARTED) == sorted([f"acct:{first_epoch}", f"acct:{second_epoch}"])
    finally:
        kill_all(workers)
