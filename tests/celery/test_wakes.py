"""Wakes through Celery with real worker nodes (SPEC §2 "Engines", §4.7).

- Every wake kind (sleep, signal, async activity, child completion) arrives
  as a Celery message while the polling backstop is 60 s — counted by
  ``weft_wakes_total{transport="celery"}`` in the node's ``EngineRecord``;
  on Redis and on RabbitMQ. Latencies are printed (``-s``).
- A wake message deleted from the owner's direct queue: polling recovers.
- The same wake delivered again, a wake of a previous epoch, a wake naming
  another engine: discarded (warned, counted), no step runs twice.
- ``CELERY_ETA_HORIZON``: a sleep reaches Celery's scheduled tasks only once
  it is due within the horizon; a one-hour sleep never does.
- The threads and solo pools run the same tour.

PostgreSQL only (asserted); ``processes`` marker: run once, not in the fast
suite.
"""

from __future__ import annotations

import json
import statistics
from typing import Any

import pytest
from celery import Celery
from celery.utils.nodenames import worker_direct

from project.demo.models import SideEffect
from tests.celery.conftest import (
    REDIS_URL,
    CeleryWorker,
    percentile,
    wait_for,
    wakes,
)
from weft_django import client
from weft_django.kernel.clock import wall_ms
from weft_django.models import (
    ClaimEvent,
    EngineRecord,
    JournalEntry,
    Timer,
    WorkflowClaim,
    WorkflowRun,
)

pytestmark = [pytest.mark.processes]

OWNER_WAKES = ("sleep", "signal", "async-activity", "child-completion")


def entries(run_id: str) -> list[JournalEntry]:
    return list(JournalEntry.objects.filter(run_id=run_id).order_by("position"))


def entry_of(run_id: str, kind: str) -> JournalEntry | None:
    return JournalEntry.objects.filter(run_id=run_id, kind=kind).order_by("position").first()


def parked_after(run_id: str, kind: str) -> bool:
    """Parked by a turn that came after the ``kind`` entry. (The entry first:
    the commit that records it leaves the run ``running`` until the next park.)"""
    if entry_of(run_id, kind) is None:
        return False
    return WorkflowRun.objects.get(pk=run_id).status == "parked"


def parked(run_id: str) -> bool:
    return WorkflowRun.objects.get(pk=run_id).status == "parked"


def token_for(key: str) -> str | None:
    row = SideEffect.objects.filter(kind="celery-token", key__startswith=f"{key}|").first()
    return row.key.split("|", 1)[1] if row is not None else None


def step_count(key: str) -> int:
    return SideEffect.objects.filter(kind="celery", key=key).count()


def ms_of(value: Any) -> int:
    return int(value.timestamp() * 1000)


def run_tours(worker: CeleryWorker, keys: list[str]) -> dict[str, dict[str, int]]:
    """Drive one tour per key to completion; returns record-based latencies (ms)."""
    handles = {
        key: client.start("celery-tour", {"id": key, "sleep": 1.0}, workflow_id=f"tour-{key}")
        for key in keys
    }
    signal_sent: dict[str, int] = {}
    completion_sent: dict[str, int] = {}
    for key, handle in handles.items():
        wait_for(
            f"{key} parked after its sleep",
            lambda h=handle: parked_after(h.run_id, "sleep"),
            worker,
        )
        signal_sent[key] = wall_ms()
        client.signal(handle.workflow_id, "go", key)
    for key in keys:
        token = wait_for(f"{key}'s async token", lambda k=key: token_for(k), worker)
        wait_for(
            f"{key} parked on its async activity", lambda h=handles[key]: parked(h.run_id), worker
        )
        completion_sent[key] = wall_ms()
        client.complete_async_activity(token, {"paid": key})
    latencies: dict[str, dict[str, int]] = {}
    for key, handle in handles.items():
        result = handle.result(timeout=30)
        assert result == {"a": f"{key}:a", "go": key, "paid": {"paid": key}, "child": f"{key}:leaf"}
        run_id = handle.run_id
        before_sleep = entry_of(run_id, "activity")
        sleep = entry_of(run_id, "sleep")
        signal = entry_of(run_id, "signal")
        paid = entry_of(run_id, "async-activity")
        child_entry = entry_of(run_id, "child")
        child = WorkflowRun.objects.get(parent_id=run_id)
        assert before_sleep and sleep and signal and paid and child_entry
        assert child.finished_at is not None
        latencies[key] = {
            # the sleep's timer fired 1 s after the park that followed step "a"
            "sleep": sleep.at_ms - (before_sleep.at_ms + 1_000),
            "signal": signal.at_ms - signal_sent[key],
            "async-activity": paid.at_ms - completion_sent[key],
            "child-completion": child_entry.at_ms - ms_of(child.finished_at),
        }
    return latencies


def print_latencies(title: str, worker: CeleryWorker, by_record: dict[str, dict[str, int]]) -> None:
    print(f"\n{title}: wake latencies (ms)")
    for kind in OWNER_WAKES:
        recorded = [lat[kind] for lat in by_record.values()]
        logged = [
            int(line["latency_ms"])
            for line in worker.wake_lines()
            if line.get("kind") == kind and line.get("latency_ms", "None") != "None"
        ]
        print(
            f"  {kind:17} write->journal median {statistics.median(recorded):5.0f} "
            f"max {max(recorded):5d} | due->turn (node log) median "
            f"{statistics.median(logged) if logged else -1:5.0f} p90 {percentile(logged, 0.9):5d}"
        )


@pytest.mark.parametrize("celery_app", ["redis", "amqp"], indirect=True)
@pytest.mark.django_db(transaction=True)
def test_every_wake_arrives_through_celery(postgres, celery_app: Celery, workers, tmp_path):
    broker = str(celery_app.conf.broker_url)
    # The polling backstop is 60 s here: nothing but a message can wake a run in time.
    worker = CeleryWorker(
        "tour",
        tmp_path,
        broker,
        env={"WEFT_CLAIM_RENEW_INTERVAL": "60", "WEFT_CLAIM_TTL": "180"},
    )
    workers.append(worker)
    record = worker.wait_ready()
    assert (record.node_name, record.pool, record.transport) == (worker.node, "prefork", "celery")
    assert record.engine_id.startswith(f"{worker.node}:")

    keys = ["t1", "t2", "t3"]
    latencies = run_tours(worker, keys)

    metrics = worker.metrics_when(
        "every wake counted",
        lambda m: all(wakes(m, kind=k, decision="proceed") >= len(keys) for k in OWNER_WAKES),
    )
    for kind in OWNER_WAKES:
        assert wakes(metrics, kind=kind, decision="proceed", transport="celery") == len(keys), (
            kind,
            metrics.wakes,
        )
    # each child's start was a message too
    assert wakes(metrics, kind="drive", transport="celery") == len(keys)
    assert wakes(metrics, transport="polling") == 0, metrics.wakes
    assert wakes(metrics, decision="discard") == 0, metrics.wakes
    assert metrics.attempts["acquired"] == 2 * len(keys)  # each tour and its child
    # every claim was released by its run's completion, by this node's engine
    assert not WorkflowClaim.objects.exclude(engine_id=None).exists()
    assert set(ClaimEvent.objects.values_list("engine_id", flat=True)) == {worker.engine_id}
    print_latencies(f"celery tour on {broker.split(':')[0]}", worker, latencies)


def find_drive(
    redis: Any, queue: str, run_id: str, via: str | None = None
) -> tuple[bytes, dict[str, Any]] | None:
    """A ``weft.drive`` message for ``run_id`` in ``queue`` (sent ``via`` that
    transport, when given: a loaded node's polling pass may have queued its
    own drive of the same run beside it)."""
    for raw in redis.lrange(queue, 0, -1):
        message = json.loads(raw)
        headers = message.get("headers", {})
        if headers.get("task") != "weft.drive" or run_id not in headers.get("argsrepr", ""):
            continue
        if via is None or f"'via': '{via}'" in headers.get("kwargsrepr", ""):
            return raw, headers
    return None


def wait_for_brpop_without(monitor: Any, queue: str) -> None:
    """Until the worker blocks in a ``BRPOP`` that no longer names ``queue``:
    a ``BRPOP`` in flight when its consumer was cancelled has ended (kombu
    keeps one in flight per connection), so nothing consumes ``queue`` now.
    ``monitor``'s socket timeout bounds the wait (hang protection only)."""
    while True:
        command = str(monitor.next_command()["command"])
        if command.upper().startswith("BRPOP ") and queue not in command:
            return


@pytest.mark.django_db(transaction=True)
def test_a_deleted_wake_message_is_recovered_by_polling(postgres, celery_app, workers, tmp_path):
    import redis as redis_client

    worker = CeleryWorker("lost", tmp_path, REDIS_URL)
    workers.append(worker)
    worker.wait_ready()
    handle = client.start("celery-waiter", {"id": "lost"}, workflow_id="lost-1")
    wait_for("the run to park on go", lambda: parked(handle.run_id), worker)

    queue = f"{worker.node}.dq2"
    with redis_client.Redis.from_url(REDIS_URL, socket_timeout=30).monitor() as monitor:
        assert celery_app.control.cancel_consumer(queue, destination=[worker.node], reply=True)
        wait_for_brpop_without(monitor, queue)
    sent = wall_ms()
    client.signal("lost-1", "go", "late")
    broker = redis_client.Redis.from_url(REDIS_URL)
    raw, headers = wait_for(
        "the signal's wake in the owner's direct queue",
        lambda: find_drive(broker, queue, handle.run_id, via="celery"),
        worker,
    )
    assert "'signal'" in headers["argsrepr"] and "'via': 'celery'" in headers["kwargsrepr"]
    assert broker.lrem(queue, 0, raw) == 1  # the message is lost
    assert celery_app.control.add_consumer(
        queue,
        exchange="C.dq2",
        exchange_type="direct",
        routing_key=worker.node,
        destination=[worker.node],
        reply=True,
    )

    wait_for(
        "step a (after the signal), parked on finish",
        lambda: step_count("lost:a") == 1 and parked_after(handle.run_id, "activity"),
        worker,
    )
    recovered = entry_of(handle.run_id, "signal")
    assert recovered is not None
    metrics = worker.metrics_when(
        "the recovered wake counted", lambda m: wakes(m, kind="signal", decision="proceed") >= 1
    )
    # The only wake that drove the run was found by polling: the message was gone.
    assert wakes(metrics, kind="signal", decision="proceed", transport="polling") == 1, (
        metrics.wakes
    )
    assert wakes(metrics, kind="signal", decision="proceed", transport="celery") == 0
    client.signal("lost-1", "finish", "done")
    assert handle.result(timeout=30) == {"go": "late", "step": "lost:a", "finish": "done"}
    assert step_count("lost:a") == 1
    print(
        f"\nlost wake: the signal was journaled {recovered.at_ms - sent} ms after it was sent, "
        "its message deleted, through a wake the node's polling re-sent (renew interval 1 s)"
    )


@pytest.mark.django_db(transaction=True)
def test_duplicate_stale_and_foreign_wakes_are_discarded(postgres, celery_app, workers, tmp_path):
    worker = CeleryWorker("dup", tmp_path, REDIS_URL)
    workers.append(worker)
    worker.wait_ready()
    handle = client.start("celery-waiter", {"id": "dup"}, workflow_id="dup-1")
    wait_for("the run to park on go", lambda: parked(handle.run_id), worker)
    claim = WorkflowClaim.objects.get(pk="dup-1")
    assert claim.engine_id == worker.engine_id
    queue = worker_direct(worker.node)
    wake = [handle.run_id, "signal", worker.engine_id, claim.epoch]

    def deliver(args: list[Any]) -> None:
        celery_app.send_task("weft.drive", args=args, kwargs={"via": "celery"}, queue=queue)

    client.signal("dup-1", "go", 1)  # its wake, plus the same wake delivered twice more
    deliver(wake)
    deliver(wake)
    wait_for(
        "step a, then parked on finish",
        lambda: step_count("dup:a") == 1 and parked_after(handle.run_id, "activity"),
        worker,
    )
    deliver(wake)  # and once more, long after the fact

    def reasons() -> set[str]:
        return {
            line["reason"]
            for line in worker.wake_lines("discarded")
            if line.get("workflow") == "dup-1"
        }

    wait_for("the duplicates to be discarded", lambda: "duplicate" in reasons(), worker)
    assert step_count("dup:a") == 1  # no double step

    # A wake of a previous epoch of this very engine: suspend and resume rotate
    # the claim (epoch + 1, released) and the resumed run is picked up again.
    client.suspend("dup-1")
    client.resume("dup-1")
    wait_for(
        "the resumed run to park again on finish",
        lambda: (
            parked(handle.run_id)
            and WorkflowClaim.objects.get(pk="dup-1").epoch == claim.epoch + 2
            and WorkflowClaim.objects.get(pk="dup-1").engine_id == worker.engine_id
        ),
        worker,
    )
    deliver(wake)  # the old generation: same engine id, older epoch
    deliver([handle.run_id, "signal", "some-other-engine", claim.epoch + 2])

    expected = {"duplicate", "generation-mismatch", "other-engine"}
    wait_for(
        "the stale and the foreign wake to be discarded", lambda: expected <= reasons(), worker
    )
    log = worker.log()
    assert 'discarded a stale "signal" wake for workflow "dup-1"' in log  # the warning
    assert step_count("dup:a") == 1  # no double step

    client.signal("dup-1", "finish", 2)
    assert handle.result(timeout=30) == {"go": 1, "step": "dup:a", "finish": 2}
    assert step_count("dup:a") == 1
    metrics = worker.metrics_when(
        "the discards counted", lambda m: wakes(m, kind="signal", decision="discard") >= 3
    )
    assert wakes(metrics, kind="signal", decision="discard") >= 3, metrics.wakes
    discards = [line for line in worker.wake_lines("discarded") if line["workflow"] == "dup-1"]
    print(f"\ndiscarded wakes: {sorted(line['reason'] for line in discards)}")


def scheduled_runs(app: Celery, node: str) -> set[str]:
    reply = app.control.inspect(destination=[node], timeout=0.5).scheduled() or {}
    found: set[str] = set()
    for entries_ in reply.values():
        for entry in entries_:
            args = entry.get("request", {}).get("args") or []
            if args:
                found.add(str(args[0]))
    return found


@pytest.mark.django_db(transaction=True)
def test_sleeps_reach_celery_only_within_the_eta_horizon(postgres, celery_app, workers, tmp_path):
    worker = CeleryWorker("eta", tmp_path, REDIS_URL, env={"WEFT_CELERY_ETA_HORIZON": "2"})
    workers.append(worker)
    worker.wait_ready()
    short = client.start("celery-sleeper", {"id": "short", "seconds": 3}, workflow_id="eta-short")
    hour = client.start("celery-sleeper", {"id": "hour", "seconds": 3600}, workflow_id="eta-hour")
    wait_for("both to park", lambda: parked(short.run_id) and parked(hour.run_id), worker)
    fire_at = Timer.objects.get(run_id=short.run_id).fire_at
    parked_at = fire_at - 3_000

    seen: set[str] = set()

    def short_is_scheduled() -> bool:
        seen.update(scheduled_runs(celery_app, worker.node))
        return short.run_id in seen

    wait_for("the 3 s sleep among the scheduled tasks", short_is_scheduled, worker)
    appeared = wall_ms()

    def short_completed() -> bool:
        seen.update(scheduled_runs(celery_app, worker.node))
        return WorkflowRun.objects.get(pk=short.run_id).status == "completed"

    wait_for("the 3 s sleep to complete", short_completed, worker)
    assert short.result(timeout=10) == "short:woke"
    seen.update(scheduled_runs(celery_app, worker.node))
    assert hour.run_id not in seen
    hour_timer = Timer.objects.get(run_id=hour.run_id)
    assert hour_timer.dispatched_at is None  # never handed to Celery
    print(
        f"\neta horizon 2 s: the 3 s sleep was among Celery's scheduled tasks "
        f"{appeared - parked_at} ms after it parked (within the horizon from +1000 ms, "
        "node polling every 1 s; fires at +3000 ms); the one-hour sleep never was"
    )

    # Graceful shutdown: claims released, the engine marked stopped.
    assert worker.stop() == 0
    record = EngineRecord.objects.get(pk=worker.engine_id)
    assert record.stopped_at is not None
    held = WorkflowClaim.objects.get(pk="eta-hour")
    assert held.engine_id is None and held.epoch == 1
    release = ClaimEvent.objects.filter(workflow_id="eta-hour", kind="release").get()
    assert release.engine_id == worker.engine_id


@pytest.mark.parametrize("pool", ["threads", "solo"])
@pytest.mark.django_db(transaction=True)
def test_the_threads_and_solo_pools_run_the_tour(postgres, celery_app, workers, tmp_path, pool):
    worker = CeleryWorker(
        f"pool-{pool}", tmp_path, REDIS_URL, pool=pool, concurrency=2 if pool == "threads" else 1
    )
    workers.append(worker)
    assert worker.wait_ready().pool == pool
    keys = [f"{pool}-1"]
    latencies = run_tours(worker, keys)
    # Polling runs every second here, so a wake may come either way (a woken
    # run found by polling is a "signal" wake): count them all.
    expected = len(OWNER_WAKES) * len(keys)
    metrics = worker.metrics_when(
        "every wake counted", lambda m: wakes(m, decision="proceed") >= expected
    )
    assert wakes(metrics, decision="proceed") >= expected, metrics.wakes
    assert wakes(metrics, decision="proceed", transport="celery") >= len(keys), metrics.wakes
    for key in keys:
        assert step_count(f"{key}:a") == 1 and step_count(f"{key}:leaf") == 1
    print_latencies(f"celery tour, {pool} pool", worker, latencies)
