"""Schedules on a fake clock (issue #16): ticks, overlap, catch-up, DST, sync.

Protects: each tick starts exactly one run (idempotency key = schedule id +
nominal time, fired by the fenced step of the driver workflow); overlap
policies; ticks older than the catch-up window are skipped and counted;
daylight-saving nights fire a daily job once; pause/resume/update/delete
wake the driver; bad input writes nothing; ``WEFT["SCHEDULES"]`` syncs
idempotently and pauses a removed entry with a warning.
"""

from __future__ import annotations

import asyncio
import warnings
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from asgiref.sync import sync_to_async
from django.db import connections

from weft_django import client, workflow
from weft_django.errors import ScheduleAlreadyExists, ScheduleNotFound, UnknownWorkflowType
from weft_django.kernel.schedule_spec import driver_workflow_id, tick_key
from weft_django.models import Schedule, WorkflowRun
from weft_django.testing import WorkflowTestEnvironment
from weft_django.warnings import WeftScheduleRemovedWarning


@workflow(name="sched-echo")
def sched_echo(ctx, data):
    return data


@workflow(name="sched-hold")
def sched_hold(ctx, data):
    yield ctx.wait_for_signal("go")
    return data


def runs_of(sid: str) -> list[WorkflowRun]:
    return list(
        WorkflowRun.objects.filter(workflow_id__startswith=f"{sid}@").order_by("created_at", "pk")
    )


def keys_of(sid: str) -> list[str]:
    return [r.idempotency_key for r in runs_of(sid) if r.idempotency_key]


@pytest.fixture
def env():
    environment = WorkflowTestEnvironment()
    # Whole seconds, so every=1 s ticks fall between steps predictably.
    environment.clock.set_ms(1_800_000_000_000)
    try:
        yield environment
    finally:
        environment.close()


def tick(env, seconds: float = 1.0) -> None:
    env.advance(seconds)
    env.run_until_idle()


@pytest.mark.django_db(transaction=True)
def test_every_second_fires_one_run_per_tick(env):
    client.create_schedule("every1", "sched-echo", {"n": 1}, every=1, overlap="allow")
    env.run_until_idle()
    assert runs_of("every1") == []  # nothing at creation: the first tick is after it
    for _ in range(3):
        tick(env)
    base = 1_800_000_000_000
    assert keys_of("every1") == [tick_key("every1", base + k * 1000) for k in (1, 2, 3)]
    assert all(r.status == "completed" for r in runs_of("every1"))
    row = Schedule.objects.get(pk="every1")
    assert row.fired_count == 3 and row.last_tick_ms == base + 3000
    info = client.describe_schedule("every1")
    assert info["next_fire_times"][0] == "2027-01-15T08:00:04Z"
    assert len(info["recent_runs"]) == 3 and info["driver"]["status"] == "parked"


@pytest.mark.django_db(transaction=True)
def test_catchup_window_fires_inside_and_counts_older(env):
    client.create_schedule(
        "catchup", "sched-echo", every=1, overlap="allow", catchup_window=timedelta(seconds=5)
    )
    env.run_until_idle()
    tick(env, 20)  # an outage of 20 ticks
    row = Schedule.objects.get(pk="catchup")
    assert row.missed_count == 15 and row.fired_count == 5
    assert len(runs_of("catchup")) == 5
    assert len(set(keys_of("catchup"))) == 5


@pytest.mark.django_db(transaction=True)
def test_overlap_skip(env):
    client.create_schedule("skip", "sched-hold", every=1, overlap="skip")
    env.run_until_idle()
    tick(env)
    tick(env)
    tick(env)
    assert len(runs_of("skip")) == 1
    assert Schedule.objects.get(pk="skip").skipped_count == 2
    client.signal(runs_of("skip")[0].workflow_id, "go", None)
    env.run_until_idle()
    tick(env)
    assert len(runs_of("skip")) == 2


@pytest.mark.django_db(transaction=True)
def test_overlap_buffer_one(env):
    client.create_schedule("buf", "sched-hold", every=10, overlap="buffer_one")
    env.run_until_idle()
    tick(env, 10)
    tick(env, 10)  # buffered
    tick(env, 10)  # buffer full: skipped
    assert len(runs_of("buf")) == 1
    row = Schedule.objects.get(pk="buf")
    assert (row.buffered_count, row.skipped_count) == (1, 1)
    client.signal(runs_of("buf")[0].workflow_id, "go", None)
    env.run_until_idle()
    tick(env, 3)  # the driver polls the previous run (2.5 s here); the buffered tick starts
    runs = runs_of("buf")
    assert len(runs) == 2
    assert runs[1].idempotency_key == tick_key("buf", 1_800_000_020_000)


@pytest.mark.django_db(transaction=True)
def test_overlap_cancel_previous(env):
    client.create_schedule("cp", "sched-hold", every=1, overlap="cancel_previous")
    env.run_until_idle()
    tick(env)
    tick(env)
    runs = runs_of("cp")
    assert runs[0].status == "cancelled"
    assert runs[1].status in ("pending", "running", "parked")


@pytest.mark.django_db(transaction=True)
def test_overlap_allow_keeps_them_all(env):
    client.create_schedule("allow", "sched-hold", every=1, overlap="allow")
    env.run_until_idle()
    for _ in range(3):
        tick(env)
    assert [r.status for r in runs_of("allow")] == ["parked"] * 3


@pytest.mark.django_db(transaction=True)
def test_pause_resume_update_delete(env):
    client.create_schedule("ctl", "sched-echo", every=1, overlap="allow")
    env.run_until_idle()
    tick(env)
    client.pause_schedule("ctl")
    env.run_until_idle()
    tick(env, 5)
    assert len(runs_of("ctl")) == 1
    assert client.describe_schedule("ctl")["next_fire_times"] == []
    client.resume_schedule("ctl")
    env.run_until_idle()
    assert len(runs_of("ctl")) == 1  # the paused stretch is not caught up
    tick(env)
    assert len(runs_of("ctl")) == 2
    client.update_schedule("ctl", every=10)
    env.run_until_idle()
    tick(env)
    assert len(runs_of("ctl")) == 2 or runs_of("ctl")[-1].idempotency_key.endswith("0000")
    client.delete_schedule("ctl")
    env.run_until_idle()
    driver = WorkflowRun.objects.latest_for(driver_workflow_id("ctl"))
    assert driver.status == "completed"
    with pytest.raises(ScheduleNotFound):
        client.describe_schedule("ctl")


@pytest.mark.django_db(transaction=True)
def test_trigger_and_backfill_are_counted_and_idempotent(env):
    client.create_schedule("bf", "sched-echo", every=1, overlap="allow")
    env.run_until_idle()
    tick(env)
    tick(env)
    handle = client.trigger_schedule("bf")
    env.run_until_idle()
    assert handle.status() == "completed"
    base = 1_800_000_000_000
    start = datetime.fromtimestamp((base - 2000) / 1000, UTC)
    end = datetime.fromtimestamp((base + 2000) / 1000, UTC)
    handles = client.backfill_schedule("bf", start, end)
    assert len(handles) == 5  # -2, -1, 0, +1, +2 s: two of them the driver fired already
    env.run_until_idle()
    row = Schedule.objects.get(pk="bf")
    assert (row.fired_count, row.triggered_count, row.backfilled_count) == (2, 1, 3)
    keys = keys_of("bf")
    assert len(keys) == len(set(keys)) == 5


@pytest.mark.django_db(transaction=True)
def test_dst_nights_on_a_fake_clock(env):
    paris = ZoneInfo("Europe/Paris")
    env.clock.set_ms(int(datetime(2026, 3, 28, 22, tzinfo=paris).timestamp() * 1000))
    client.create_schedule("spring", "sched-echo", cron="30 2 * * *", timezone="Europe/Paris")
    env.run_until_idle()
    for _ in range(12):  # half-hour steps through the night without 02:xx
        tick(env, 1800)
    spring = runs_of("spring")
    assert len(spring) == 1
    assert spring[0].idempotency_key == tick_key(
        "spring", int(datetime(2026, 3, 29, 3, 0, tzinfo=paris).timestamp() * 1000)
    )
    env.clock.set_ms(int(datetime(2026, 10, 24, 22, tzinfo=paris).timestamp() * 1000))
    client.create_schedule("autumn", "sched-echo", cron="30 2 * * *", timezone="Europe/Paris")
    env.run_until_idle()
    for _ in range(14):  # through the night that has 02:30 twice
        tick(env, 1800)
    assert len(runs_of("autumn")) == 1


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("args", "kwargs", "error"),
    [
        (("b1", "sched-echo"), {"cron": "99 * * * *"}, ValueError),
        (("b2", "sched-echo"), {"every": 1, "timezone": "Nowhere/Land"}, ValueError),
        (("b3", "sched-echo"), {}, ValueError),
        (("b4", "sched-echo"), {"every": 1, "cron": "* * * * *"}, ValueError),
        (("not a valid id", "sched-echo"), {"every": 1}, ValueError),
        (("b6", "no-such-workflow"), {"every": 1}, UnknownWorkflowType),
    ],
)
def test_bad_input_writes_nothing(args, kwargs, error):
    with pytest.raises(error) as info:
        client.create_schedule(*args, **kwargs)
    shown = {**kwargs, "id": args[0], "wf": args[1]}
    assert any(str(v) in str(info.value) for v in shown.values() if v not in (1,)) or kwargs == {}
    assert Schedule.objects.count() == 0
    assert WorkflowRun.objects.count() == 0


@pytest.mark.django_db(transaction=True)
def test_duplicate_and_unknown_ids(env):
    client.create_schedule("dup", "sched-echo", every=60)
    with pytest.raises(ScheduleAlreadyExists):
        client.create_schedule("dup", "sched-echo", every=60)
    with pytest.raises(ScheduleNotFound):
        client.pause_schedule("nope")
    with pytest.raises(ValueError):
        client.update_schedule("dup", cron="bad")
    assert Schedule.objects.get(pk="dup").version == 1
    assert [s["schedule_id"] for s in client.list_schedules()] == ["dup"]


@pytest.mark.django_db(transaction=True)
def test_declared_schedules_sync_idempotently():
    declared = {
        "nightly": {"workflow": "sched-echo", "cron": "0 3 * * *", "timezone": "Europe/Paris"}
    }
    first = WorkflowTestEnvironment(schedules=declared)
    try:
        row = Schedule.objects.get(pk="nightly")
        assert row.declared and row.version == 1 and row.timezone == "Europe/Paris"
        client.pause_schedule("nightly")  # an operator's pause
    finally:
        first.close()
    again = WorkflowTestEnvironment(schedules=declared)  # same declaration: nothing changes
    again.close()
    row = Schedule.objects.get(pk="nightly")
    assert row.paused and row.version == 2
    changed = {"nightly": {**declared["nightly"], "cron": "0 4 * * *"}}
    WorkflowTestEnvironment(schedules=changed).close()
    row = Schedule.objects.get(pk="nightly")
    assert row.cron == "0 4 * * *" and not row.paused and row.version == 3
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        WorkflowTestEnvironment(schedules={}).close()
    assert [type(w.message) for w in caught].count(WeftScheduleRemovedWarning) == 1
    row = Schedule.objects.get(pk="nightly")
    assert row.paused and not row.declared
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        WorkflowTestEnvironment(schedules={}).close()
    assert WeftScheduleRemovedWarning not in [type(w.message) for w in caught]


@pytest.mark.django_db(transaction=True)
def test_async_twins(env):
    async def go():
        try:
            await client.acreate_schedule("as", "sched-echo", every=60)
            assert (await client.adescribe_schedule("as"))["schedule_id"] == "as"
            assert [s["schedule_id"] for s in await client.alist_schedules()] == ["as"]
            await client.apause_schedule("as")
            await client.adelete_schedule("as")
        finally:
            await sync_to_async(connections.close_all, thread_sensitive=True)()

    asyncio.run(go())
    assert Schedule.objects.count() == 0


@pytest.mark.django_db(transaction=True)
def test_status_lines_and_the_ticks_metric(env):
    from io import StringIO

    from django.core.management import call_command
    from prometheus_client import CollectorRegistry, generate_latest

    from weft_django.contrib.prometheus import WeftClusterCollector

    client.create_schedule("st", "sched-hold", every=1, overlap="skip")
    env.run_until_idle()
    tick(env)
    tick(env)
    out = StringIO()
    call_command("weft_status", stdout=out)
    text = out.getvalue()
    assert "schedules: 1; ticks (all schedules): fired 1, skipped 1, buffered 0" in text
    assert "  st: sched-hold (every 1 s); next " in text
    registry = CollectorRegistry()
    registry.register(WeftClusterCollector())
    metrics = generate_latest(registry).decode()
    assert 'weft_schedule_ticks_total{outcome="fired"} 1.0' in metrics
    assert 'weft_schedule_ticks_total{outcome="skipped"} 1.0' in metrics
    assert 'weft_schedule_ticks_total{outcome="missed"} 0.0' in metrics


@pytest.mark.django_db(transaction=True)
def test_admin_lists_next_fire_and_last_runs(env, admin_client):
    from django.urls import reverse

    client.create_schedule("adm", "sched-echo", every=1, overlap="allow")
    env.run_until_idle()
    tick(env)
    page = admin_client.get(reverse("admin:weft_schedule_changelist"))
    assert page.status_code == 200
    text = page.content.decode()
    assert "adm" in text and "every 1 s" in text and "2027-01-15T08:00:02Z" in text
    detail = admin_client.get(reverse("admin:weft_schedule_change", args=["adm"]))
    assert "adm@2027-01-15T08:00:01.000Z" in detail.content.decode()
    url = reverse("admin:weft_schedule_changelist")
    admin_client.post(url, {"action": "pause_schedules", "_selected_action": ["adm"]})
    assert Schedule.objects.get(pk="adm").paused
    admin_client.post(url, {"action": "trigger_schedules", "_selected_action": ["adm"]})
    assert Schedule.objects.get(pk="adm").triggered_count == 1


def test_system_checks_name_a_bad_declared_schedule(settings):
    from weft_django.checks import check_weft_settings

    settings.WEFT = {
        "SCHEDULES": {
            "ok": {"workflow": "sched-echo", "every": 60},
            "ghost": {"workflow": "no-such-workflow", "every": 60},
            "badtz": {"workflow": "sched-echo", "every": 60, "timezone": "Mars/Olympus"},
            "bad id": {"workflow": "sched-echo", "every": 60},
        }
    }
    found = {(m.id, m.msg.split(":")[0]) for m in check_weft_settings()}
    assert (
        "weft.E029",
        "WEFT['SCHEDULES']['ghost'] names the workflow 'no-such-workflow', "
        "which no @workflow registers",
    ) in {(m.id, m.msg) for m in check_weft_settings()}
    assert ("weft.E028", "WEFT['SCHEDULES']['badtz']") in found
    messages = [(m.id, m.msg) for m in check_weft_settings()]
    assert any(i == "weft.E027" and "'bad id'" in msg for i, msg in messages)
