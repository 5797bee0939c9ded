from datetime import timedelta

import pytest

from weft_django import activity, client, workflow
from weft_django.engine import Engine
from weft_django.models import ClaimEvent, JournalEntry

CALLS: list[str] = []


@activity()
def add(a, b):
    CALLS.append("add")
    return a + b


@workflow(name="smoke-add")
def smoke_add(ctx, data):
    x = yield ctx.run(add, data["a"], data["b"])
    yield ctx.sleep(timedelta(seconds=10))
    y = yield ctx.run(add, x, 1)
    got = yield ctx.wait_for_signal("go")
    return {"x": x, "y": y, "got": got}


@pytest.mark.django_db(transaction=True)
def test_smoke(clock):
    engine = Engine(clock=clock, background_tasks="manual").boot()
    try:
        h = client.start("smoke-add", {"a": 1, "b": 2}, workflow_id="s-1")
        engine.run_until_idle()
        assert h.status() == "parked"
        clock.advance(10_001)
        engine.run_until_idle()
        assert h.status() == "parked"
        client.signal("s-1", "go", {"ok": True})
        engine.run_until_idle()
        assert h.status() == "completed", h.error()
        assert h.result(timeout=1) == {"x": 3, "y": 4, "got": {"ok": True}}
    finally:
        engine.dispose(grace=0)
    kinds = list(ClaimEvent.objects.filter(workflow_id="s-1").values_list("kind", "epoch"))
    assert kinds == [("acquire", 1), ("release", 1)]
    assert JournalEntry.objects.filter(run_id=h.run_id).count() == 4
