"""Fair queues: round robin across fairness keys (``engine.queues.fair``).

Protects: with ``"fair": True`` a key that floods the queue cannot starve a
key with one waiting run (the starvation reproduction: 20 runs each for
``busy-1`` / ``busy-2``, then one each for 4 small keys, per-key
concurrency 1: every small key starts before the 5th run of either busy
key), a weight w takes w admissions per round, FIFO queues keep their
order, and bad fairness arguments are refused before anything is written.
"""

from __future__ import annotations

import pytest
from django.test import override_settings

from weft_django import activity, client, workflow
from weft_django.engine import Engine
from weft_django.errors import InvalidArgumentError
from weft_django.models import WorkflowRun

QUEUES = {
    "fair-q": {"concurrency": 2, "per_key_concurrency": 1, "fair": True},
    "fifo-q": {"concurrency": 2, "per_key_concurrency": 1},
    "weighted-q": {"concurrency": 1, "fair": True},
}
ORDER: list[str] = []


@activity()
def fq_note(tag):
    ORDER.append(tag)
    return tag


@workflow(name="fq-hold")
def fq_hold(ctx, tag):
    yield ctx.run(fq_note, tag)
    yield ctx.wait_for_signal("go")
    return tag


pytestmark = [pytest.mark.django_db(transaction=True)]


@pytest.fixture(autouse=True)
def _queues():
    ORDER.clear()
    with override_settings(WEFT={"QUEUES": QUEUES}):
        yield


def _drain(engine, clock, total: int) -> None:
    """Let each admitted run finish, one admission round at a time."""
    for _ in range(total + 5):
        engine.run_until_idle()
        parked = list(WorkflowRun.objects.filter(status="parked"))
        if not parked:
            break
        clock.advance(10)
        client.signal(parked[0].workflow_id, "go", 1)
    assert WorkflowRun.objects.filter(status="completed").count() == total


def _starvation(engine, clock, queue: str) -> list[str]:
    for n in range(20):
        for busy in ("busy-1", "busy-2"):
            client.start("fq-hold", f"{busy}#{n}", queue=queue, concurrency_key=busy)
    for small in range(4):
        client.start("fq-hold", f"small-{small}", queue=queue, concurrency_key=f"small-{small}")
    _drain(engine, clock, 44)
    return list(ORDER)


def test_fair_starts_every_small_key_before_the_fifth_run_of_a_busy_key(clock):
    engine = Engine(clock=clock, background_tasks="manual").boot()
    try:
        order = _starvation(engine, clock, "fair-q")
        for busy in ("busy-1", "busy-2"):
            fifth = order.index(f"{busy}#4")
            for small in range(4):
                assert order.index(f"small-{small}") < fifth, order
    finally:
        engine.dispose(grace=0)


def test_fifo_starves_the_small_keys(clock):
    engine = Engine(clock=clock, background_tasks="manual").boot()
    try:
        order = _starvation(engine, clock, "fifo-q")
        fifth = min(order.index("busy-1#4"), order.index("busy-2#4"))
        assert order.index("small-0") > fifth, order
    finally:
        engine.dispose(grace=0)


def test_a_weight_of_two_takes_two_admissions_per_round(clock):
    engine = Engine(clock=clock, background_tasks="manual").boot()
    try:
        for n in range(6):
            client.start(
                "fq-hold", f"heavy#{n}", queue="weighted-q", fairness_key="heavy", fairness_weight=2
            )
            client.start("fq-hold", f"light#{n}", queue="weighted-q", fairness_key="light")
        _drain(engine, clock, 12)
        first_nine = [tag.split("#")[0] for tag in ORDER[:9]]
        assert first_nine.count("heavy") == 6 and first_nine.count("light") == 3, ORDER
    finally:
        engine.dispose(grace=0)


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"fairness_weight": 0}, "0"),
        ({"fairness_weight": -2}, "-2"),
        ({"fairness_weight": True}, "True"),
        ({"fairness_key": ""}, "''"),
        ({"queue": None, "fairness_key": "k"}, "'k'"),
    ],
)
def test_bad_fairness_arguments_write_nothing(options, named):
    kwargs = {"queue": "fair-q", **options}
    with pytest.raises(InvalidArgumentError, match=named):
        client.start("fq-hold", None, workflow_id="bad", **kwargs)
    assert not WorkflowRun.objects.filter(workflow_id="bad").exists()
