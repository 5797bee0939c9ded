"""Every start path obeys the queue across real ``weft_worker`` processes.

Three engines on PostgreSQL share queue ``flow-c2`` (concurrency 2); runs of
it are started as attached and detached children, by a schedule's ticks and
by ``signal_with_start``, and one engine is SIGKILLed while it holds a slot.
Audited from the table each activity writes (``flow_workflows``): at no
instant do more than 2 runs of the queue hold their slot -- an attempt the
kill cut short counts until the kill. Every wait is a poll bounded by a
timeout that is hang protection only.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.db import connection
from django.test import override_settings

from project.demo.models import SideEffect
from tests.engines.flow_workflows import IMPORTS, QUEUES
from tests.engines.harness import Worker, wait_for
from tests.engines.test_queues import _max_overlap
from weft_django import client
from weft_django.kernel.clock import wall_ms
from weft_django.models import ClaimEvent, WorkflowRun

pytestmark = [pytest.mark.processes, pytest.mark.django_db(transaction=True)]

DONE_TIMEOUT_S = 180.0  # hang protection only


def _entered() -> list[tuple[str, int, int]]:
    rows = []
    for key in SideEffect.objects.filter(kind="flow-in").values_list("key", flat=True):
        token, start, pid = key.split("|")
        rows.append((token, int(start), int(pid)))
    return rows


def _left() -> dict[tuple[str, int], int]:
    out = {}
    for key in SideEffect.objects.filter(kind="flow-out").values_list("key", flat=True):
        token, start, end = key.split("|")
        out[(token, int(start))] = int(end)
    return out


def _flow_runs() -> list[WorkflowRun]:
    return list(WorkflowRun.objects.filter(name="flow-slot"))


@override_settings(WEFT={"QUEUES": QUEUES})
def test_children_ticks_and_signal_with_start_never_exceed_the_queue(tmp_path: Path) -> None:
    assert connection.vendor == "postgresql"
    env = {"WEFT_QUEUES": json.dumps(QUEUES)}
    workers = [Worker(n, tmp_path, env=env, imports=IMPORTS) for n in ("f-w1", "f-w2", "f-w3")]
    try:
        for worker in workers:
            worker.wait_booted()
        parents = [client.start("flow-parent", f"fp{i}", workflow_id=f"fp{i}") for i in range(2)]
        for i in range(4):
            client.signal_with_start("flow-slot", None, f"fs-{i}", "hello", i)
        client.create_schedule("flow-tick", "flow-slot", every=0.5, overlap="allow")

        def victim_holding() -> Worker | None:
            left = _left()
            for token, start, pid in _entered():
                if (token, start) in left or len(left) < 2:
                    continue
                for worker in workers:
                    if worker.proc.pid == pid:
                        return worker
            return None

        victim = wait_for("an engine mid-activity", victim_holding, *workers)
        kill_ms = wall_ms()
        victim.kill()
        survivors = [w for w in workers if w is not victim]

        def ticked_enough() -> bool:
            ticks = [r for r in _flow_runs() if r.workflow_id.startswith("flow-tick@")]
            return len([r for r in ticks if r.status == "completed"]) >= 4

        wait_for("4 schedule ticks run", ticked_enough, *survivors, timeout=DONE_TIMEOUT_S)
        client.delete_schedule("flow-tick")
        wait_for(
            "every flow run completed",
            lambda: (
                all(r.status == "completed" for r in _flow_runs())
                and all(p.status() == "completed" for p in parents)
            ),
            *survivors,
            timeout=DONE_TIMEOUT_S,
            interval=0.2,
        )
        runs = _flow_runs()
        assert {r.queue for r in runs} == {"flow-c2"}
        paths = {"child": 0, "detached": 0, "tick": 0, "sws": 0}
        for run in runs:
            wid = run.workflow_id
            kind = (
                "tick"
                if wid.startswith("flow-tick@")
                else "sws"
                if wid.startswith("fs-")
                else "detached"
                if "-d" in wid
                else "child"
            )
            paths[kind] += 1
        assert paths["child"] == 8 and paths["detached"] == 4 and paths["sws"] == 4
        assert paths["tick"] >= 4
        left = _left()
        intervals = []
        cut = 0
        for token, start, pid in _entered():
            end = left.get((token, start))
            if end is None:
                assert pid == victim.proc.pid and start <= kill_ms, (token, start, pid)
                end, cut = kill_ms, cut + 1
            intervals.append((start, end, token))
        assert cut >= 1, "the victim had an attempt in flight"
        assert _max_overlap(intervals) <= 2, sorted(intervals)
        assert ClaimEvent.objects.filter(kind="takeover").exists()
        print(f"\nflow paths: {len(intervals)} attempts ({cut} cut by the kill), {paths}")
    finally:
        for worker in workers:
            worker.kill()
