"""Workflows of the events/streams process tests (``test_published_live``),
loaded by the ``weft_worker`` children and the test alike (not an app)."""

from __future__ import annotations

import time
from typing import Any

from weft_django import activity, workflow

IMPORTS = ("tests.engines.published_workflows",)


@activity(name="pub.pause")
def pub_pause(seconds: float) -> float:
    time.sleep(seconds)
    return seconds


@workflow(name="pub-set-later")
def pub_set_later(ctx: Any, data: Any) -> Any:
    """Sets ``answer`` after a pause: the test is already waiting for it."""
    yield ctx.run(pub_pause, data["pause"])
    ctx.set_event("answer", {"from": "engine", "n": data["n"]})
    yield ctx.wait_for_signal("end")
    return "ok"


@workflow(name="pub-stream-chain")
def pub_stream_chain(ctx: Any, data: Any) -> Any:
    """Writes ``steps`` values, one slow activity after each; then closes."""
    for i in range(data["steps"]):
        ctx.write_stream("progress", {"step": i, "of": data["steps"]})
        yield ctx.run(pub_pause, data["pause"])
    ctx.close_stream("progress")
    return "done"
