"""A schedule every second on 3 real engines, one SIGKILLed halfway (issue #16).

SPEC §8 process test on PostgreSQL (``tests/engines/harness.py``): exactly
one run per tick, no tick inside the catch-up window missed, the driver's
journal fenced (``tests/engines/schedule_scenario.py``). Durations are never
asserted; the lag is printed.
"""

from __future__ import annotations

import pytest
from django.db import connection

from tests.engines.harness import Worker, kill_all
from tests.engines.schedule_scenario import run_scenario

pytestmark = [pytest.mark.processes]


@pytest.mark.django_db(transaction=True)
def test_every_second_three_engines_one_sigkilled(tmp_path):
    assert connection.vendor == "postgresql"
    workers = [
        Worker(f"sched-{i}", tmp_path, imports=("tests.engines.schedule_workflows",))
        for i in range(3)
    ]
    try:
        for worker in workers:
            worker.wait_booted()
        out = run_scenario("proc-every", workers, lambda w: w.engine_id)
        print(f"\n[schedules, 3 engines] {out}")
    finally:
        kill_all(workers)
