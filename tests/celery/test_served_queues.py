"""Celery nodes serve the weft queues of the Celery queues they consume, with
real workers on a real broker.

Protects: a node started with ``-Q weft.q.cq-a`` serves only the weft queue
``cq-a`` (its ``EngineRecord.queues`` says so), and every run of ``cq-a`` is
claimed by it alone (its claim events carry its engine id), while a node of
``cq-b`` drives ``cq-b``; runs of ``cq-c``, which no node serves, stay
pending and are reported by ``weft_status --json`` (``unserved_queues``)
and ``weft.W036`` until a node consuming ``weft.q.cq-c`` boots and drives
them. A ``weft.q.*`` name no declared queue matches is logged by name and
maps to nothing. PostgreSQL only.
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Iterator

import pytest
from django.conf import settings
from django.core.management import call_command
from django.test import override_settings

from tests.celery.conftest import HANG_TIMEOUT_S, REDIS_URL, CeleryWorker, wait_for
from weft_django import client
from weft_django.checks.queues import check_unserved_queues
from weft_django.models import ClaimEvent, EngineRecord, WorkflowRun

pytestmark = [pytest.mark.processes]

QUEUES: dict[str, dict[str, object]] = {"cq-a": {}, "cq-b": {}, "cq-c": {"concurrency": 2}}
ENV = {"WEFT_QUEUES": json.dumps(QUEUES)}


@pytest.fixture
def queues() -> Iterator[None]:
    """The test process (the web process) declares the same queues as the nodes."""
    with override_settings(WEFT={**getattr(settings, "WEFT", {}), "QUEUES": QUEUES}):
        yield


def _consumed_queues(worker: CeleryWorker) -> set[str]:
    """The worker's ``[queues]`` banner, less its direct queue (``<node>.dq2``)."""
    names = re.findall(r"^\s*\.> (\S+)\s+exchange=", worker.log(), flags=re.M)
    return {n for n in names if not n.endswith(".dq2")}


def _start(queue: str, n: int) -> list[str]:
    return [
        client.start("celery-leaf", {"id": f"{queue}-{i}"}, queue=queue).workflow_id
        for i in range(n)
    ]


def _completed(workflow_ids: list[str]) -> bool:
    done = WorkflowRun.objects.filter(workflow_id__in=workflow_ids, status="completed")
    return done.count() == len(workflow_ids)


def _claimers(workflow_ids: list[str]) -> set[str]:
    """Every engine id that ever took a claim of these workflows."""
    events = ClaimEvent.objects.filter(workflow_id__in=workflow_ids).exclude(engine_id="")
    return set(events.values_list("engine_id", flat=True))


def _picked_up(worker: CeleryWorker) -> set[str]:
    """The workflows of the ``weft.pickup`` messages the node received (their results)."""
    pattern = r"Task weft\.pickup\[[^\]]+\] succeeded .*'workflow_id': '([^']+)'"
    return set(re.findall(pattern, worker.log()))


def _status_json() -> dict[str, object]:
    out = io.StringIO()
    call_command("weft_status", "--json", stdout=out)
    return dict(json.loads(out.getvalue()))


@pytest.mark.django_db(transaction=True)
def test_nodes_serve_the_weft_queues_of_their_celery_queues(
    postgres, queues, celery_app, workers, tmp_path
):
    only_a = CeleryWorker(
        "cq-a", tmp_path, REDIS_URL, pool="threads", env=ENV, extra=("-Q", "weft.q.cq-a")
    )
    only_b = CeleryWorker(
        "cq-b", tmp_path, REDIS_URL, pool="threads", env=ENV, extra=("-Q", "weft,weft.q.cq-b")
    )
    workers.extend([only_a, only_b])
    record_a, record_b = only_a.wait_ready(), only_b.wait_ready()
    assert record_a.queues == ["cq-a"] and record_b.queues == ["cq-b"]
    assert _consumed_queues(only_a) == {"weft", "weft.q.cq-a"}, _consumed_queues(only_a)
    assert "weft.q.cq-c" not in _consumed_queues(only_b)

    runs_a, runs_b, runs_c = _start("cq-a", 6), _start("cq-b", 6), _start("cq-c", 4)
    unqueued = [client.start("celery-leaf", {"id": f"none-{i}"}).workflow_id for i in range(2)]
    wait_for(
        "the runs of cq-a, cq-b and no queue to complete",
        lambda: _completed(runs_a + runs_b + unqueued),
        only_a,
        only_b,
        timeout=HANG_TIMEOUT_S * 2,
    )
    # Each queue's runs were claimed by its own node only.
    assert _claimers(runs_a) == {only_a.engine_id}
    assert _claimers(runs_b) == {only_b.engine_id}
    assert _claimers(runs_c) == set()
    # The pickup of a queued run went to its queue's Celery queue only.
    assert _picked_up(only_a) & set(runs_a) and _picked_up(only_b) & set(runs_b)
    assert not _picked_up(only_a) & set(runs_b + runs_c)
    assert not _picked_up(only_b) & set(runs_a + runs_c)
    # Nobody serves cq-c: its runs wait, and weft_status and the deploy check say so.
    statuses = WorkflowRun.objects.filter(workflow_id__in=runs_c).values_list("status", flat=True)
    assert set(statuses) == {"pending"}
    report = _status_json()
    assert report["unserved_queues"] == {"cq-c": 4}
    alive = {e["node_name"]: e["queues"] for e in report["engines"] if e["alive"]}  # type: ignore[attr-defined, index]
    assert alive == {only_a.node: ["cq-a"], only_b.node: ["cq-b"]}
    warnings = check_unserved_queues()
    assert [w.id for w in warnings] == ["weft.W036"] and "'cq-c'" in warnings[0].msg

    # A node consuming weft.q.cq-c boots (and a name no declared queue matches,
    # logged by name): the waiting runs start, driven by it alone.
    only_c = CeleryWorker(
        "cq-c",
        tmp_path,
        REDIS_URL,
        pool="threads",
        env=ENV,
        extra=("-Q", "weft.q.cq-c,weft.q.cq-nope"),
    )
    workers.append(only_c)
    assert only_c.wait_ready().queues == ["cq-c"]
    wait_for(
        "the runs of cq-c to complete",
        lambda: _completed(runs_c),
        only_a,
        only_b,
        only_c,
        timeout=HANG_TIMEOUT_S * 2,
    )
    assert _claimers(runs_c) == {only_c.engine_id}
    assert _status_json()["unserved_queues"] == {}
    assert check_unserved_queues() == []
    assert "names 'weft.q.cq-nope' in -Q/-X, but WEFT['QUEUES'] declares no" in only_c.log()
    assert EngineRecord.objects.filter(node_name=only_c.node, queues=["cq-c"]).exists()
    print(
        f"\ncelery served queues: cq-a {len(runs_a)} runs by {only_a.node}, cq-b "
        f"{len(runs_b)} by {only_b.node}, cq-c {len(runs_c)} waited, then by {only_c.node}"
    )


@pytest.mark.django_db(transaction=True)
def test_a_node_of_no_declared_weft_queue_serves_none_and_says_so(
    postgres, queues, celery_app, workers, tmp_path
):
    stray = CeleryWorker(
        "cq-stray", tmp_path, REDIS_URL, pool="solo", env=ENV, extra=("-Q", "weft.q.nope")
    )
    workers.append(stray)
    assert stray.wait_ready().queues == []
    runs = _start("cq-a", 2)
    unqueued = client.start("celery-leaf", {"id": "stray-none"}).workflow_id
    wait_for("the run without a queue to complete", lambda: _completed([unqueued]), stray)
    assert _claimers(runs) == set()
    assert _status_json()["unserved_queues"] == {"cq-a": 2}
    log = stray.log()
    assert "names 'weft.q.nope' in -Q/-X, but WEFT['QUEUES'] declares no" in log, log[-3000:]
    assert "serves the weft queues: no declared queue" in log
