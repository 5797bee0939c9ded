"""``client.debounce``: a burst of calls for one ``(workflow, key)`` gives one run.

Protects: a call within ``period`` replaces the input and pushes the start
back by ``period``, never beyond ``max_wait`` after the burst's first call;
a call after the burst's run is due starts the next burst; exactly one run
per burst when 3 processes call 50 times together (``tests.procs.debouncer``);
bad arguments are refused naming the value, nothing written.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.support import child_env, python
from weft_django import client, workflow
from weft_django.engine import Engine
from weft_django.errors import InvalidArgumentError
from weft_django.models import WorkflowRun

pytestmark = [pytest.mark.django_db(transaction=True)]


@workflow(name="deb-echo")
def deb_echo(ctx, data):
    return data
    yield


def _runs(name: str = "deb-echo") -> list[WorkflowRun]:
    return list(WorkflowRun.objects.filter(name=name).order_by("created_at"))


def test_a_burst_is_one_run_with_the_last_input(clock):
    engine = Engine(clock=clock, background_tasks="manual").boot()
    try:
        t0 = clock()
        first = client.debounce("deb-echo", 1, key="k", period=2.0)
        for n in range(2, 6):
            clock.advance(1_500)
            engine.run_until_idle()
            handle = client.debounce("deb-echo", n, key="k", period=2.0)
            assert handle.workflow_id == first.workflow_id
        runs = _runs()
        assert len(runs) == 1 and runs[0].status == "pending"
        assert runs[0].start_at == t0 + 4 * 1_500 + 2_000
        client.debounce("deb-echo", "other", key="k2", period=2.0)  # another key: its own run
        clock.advance(1_999)
        engine.run_until_idle()
        assert first.status() == "pending"
        clock.advance(1)
        engine.run_until_idle()
        assert first.result(timeout=0) == 5
        later = client.debounce("deb-echo", 6, key="k", period=2.0)  # the next burst
        assert later.workflow_id != first.workflow_id
        assert len([r for r in _runs() if r.input != "other"]) == 2
    finally:
        engine.dispose(grace=0)


def test_max_wait_bounds_a_long_burst(clock):
    engine = Engine(clock=clock, background_tasks="manual").boot()
    try:
        t0 = clock()
        first = client.debounce("deb-echo", 0, key="m", period=1.0, max_wait=3.0)
        for n in range(1, 6):
            clock.advance(500)
            engine.run_until_idle()
            client.debounce("deb-echo", n, key="m", period=1.0, max_wait=3.0)
        assert _runs()[0].start_at == t0 + 3_000
        clock.advance(500)  # t0 + 3 s: the burst's run is due
        engine.run_until_idle()
        assert first.result(timeout=0) == 5
        assert len(_runs()) == 1
    finally:
        engine.dispose(grace=0)


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"period": 0}, "period"),
        ({"period": -1}, "period"),
        ({"period": 2, "max_wait": 1}, "max_wait"),
        ({"period": 1, "key": ""}, "key"),
        ({"period": 1, "workflow_id": "x"}, "workflow_id"),
        ({"period": 1, "queue": "no-such-queue"}, "no-such-queue"),
        ({"period": 1, "fairness_weight": 0}, "fairness_weight"),
    ],
)
def test_bad_arguments_write_nothing(kwargs, named):
    options = {"key": "bad", **kwargs}
    with pytest.raises(InvalidArgumentError, match=named):
        client.debounce("deb-echo", None, **options)
    assert _runs() == []


def test_fifty_calls_from_three_processes_give_one_run(tmp_path: Path):
    barrier = tmp_path / "go"
    env = child_env()
    procs = [
        subprocess.Popen(
            [python(), "-m", "tests.procs.debouncer", f"p{n}", str(calls), str(barrier)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n, calls in enumerate((17, 17, 16))
    ]
    barrier.touch()
    outputs = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        outputs.append(out.split())
    ids = {wid for out in outputs for wid in out}
    assert sum(len(out) for out in outputs) == 50
    runs = _runs("deb-target")
    assert len(runs) == 1, [(r.workflow_id, r.input) for r in runs]
    assert ids == {runs[0].workflow_id}
    # The last input is one process's last call (the lock orders them).
    assert runs[0].input in (["p0", 16], ["p1", 16], ["p2", 15]), runs[0].input
