"""A schedule every second on 2 real Celery nodes, one SIGKILLed halfway (issue #16).

The same scenario as ``tests/engines/test_schedule_processes.py``
(``tests/engines/schedule_scenario.py``): exactly one run per tick, no tick
inside the catch-up window missed, the driver's journal fenced. PostgreSQL.
"""

from __future__ import annotations

import pytest

from tests.celery.conftest import REDIS_URL, CeleryWorker
from tests.engines.schedule_scenario import run_scenario

pytestmark = [pytest.mark.processes]

IMPORTS = ("tests.celery.workflows", "tests.engines.schedule_workflows")


@pytest.mark.django_db(transaction=True)
def test_every_second_two_celery_nodes_one_sigkilled(postgres, celery_app, workers, tmp_path):
    nodes = [CeleryWorker(f"sched-{i}", tmp_path, REDIS_URL, imports=IMPORTS) for i in range(2)]
    workers.extend(nodes)
    for node in nodes:
        node.wait_ready()
    out = run_scenario("celery-every", nodes, lambda n: n.engine_id)
    print(f"\n[schedules, 2 Celery nodes] {out}")
