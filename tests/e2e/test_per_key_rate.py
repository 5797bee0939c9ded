"""Per-key rate limits: ``"per_key_rate": "2/m"`` beside ``"rate"``.

Protects: at most R admissions per sliding window per ``concurrency_key``,
counted from the slot rows every engine's admission writes (two engines
here, taking turns), on the admitter's clock; a run without a key is not
limited by it; the waiting run says what it waits for; a rate that does not
parse is refused naming the value.
"""

from __future__ import annotations

import pytest
from django.test import override_settings

from tests.e2e.helpers import latest
from weft_django import client, workflow
from weft_django.conf import build_settings
from weft_django.engine import Engine
from weft_django.engine.queues.flow import waiting_reason
from weft_django.models import WorkflowRun

QUEUES = {"pkr": {"per_key_rate": "2/m"}, "pkr-fair": {"per_key_rate": "1/m", "fair": True}}


@workflow(name="pkr-quick")
def pkr_quick(ctx, data):
    return data
    yield  # a generator body


pytestmark = [pytest.mark.django_db(transaction=True)]


@pytest.fixture(autouse=True)
def _queues():
    with override_settings(WEFT={"QUEUES": QUEUES}):
        yield


def _done(prefix: str) -> dict[str, int]:
    runs = WorkflowRun.objects.filter(workflow_id__startswith=prefix, status="completed")
    out: dict[str, int] = {}
    for key in runs.values_list("concurrency_key", flat=True):
        out[key or "-"] = out.get(key or "-", 0) + 1
    return out


@pytest.mark.parametrize("queue", ["pkr", "pkr-fair"])
def test_per_key_rate_across_two_engines(clock, queue):
    per = 2 if queue == "pkr" else 1
    one = Engine(clock=clock, background_tasks="manual", engine_id="pkr-1").boot()
    two = Engine(clock=clock, background_tasks="manual", engine_id="pkr-2").boot()
    try:
        for i in range(5):
            for key in ("a", "b"):
                client.start(
                    "pkr-quick", i, workflow_id=f"r-{key}{i}", queue=queue, concurrency_key=key
                )
        client.start("pkr-quick", 0, workflow_id="r-free", queue=queue)
        one.run_until_idle()
        two.run_until_idle()
        assert _done("r-") == {"a": per, "b": per, "-": 1}
        reason = waiting_reason(latest(f"r-a{per}")) or ""
        assert "rate limit of concurrency key 'a'" in reason, reason
        clock.advance(30_000)
        two.run_until_idle()
        one.run_until_idle()
        assert _done("r-") == {"a": per, "b": per, "-": 1}
        clock.advance(30_001)
        two.run_until_idle()
        one.run_until_idle()
        assert _done("r-") == {"a": 2 * per, "b": 2 * per, "-": 1}
    finally:
        one.dispose(grace=0)
        two.dispose(grace=0)


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"per_key_rate": "ten per minute"}, "ten per minute"),
        ({"per_key_rate": "0/m"}, "0/m"),
        ({"fair": "yes"}, "yes"),
        ({"fairness": True}, "fairness"),
    ],
)
def test_bad_queue_options_are_refused_by_name(options, named):
    _settings, problems = build_settings({"QUEUES": {"bad": options}})
    assert any(named in str(problem) for problem in problems), problems
