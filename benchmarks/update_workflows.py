"""The update benchmark's workflow (``benchmarks/updates.py``), kept out of
``benchmarks.workflows`` so that benchmark's children are unchanged.

``bench-counter`` answers the same request two ways: the update ``incr``
(the answer is the handler's return value) and the signal ``incr`` to an
``on_signal`` handler plus the query ``seen`` (the caller polls until the
query shows its request). Both bump the same counter, so the two paths do
the same work on the same history.
"""

from __future__ import annotations

from typing import Any

from weft_django import workflow


@workflow(name="bench-counter")
def bench_counter(ctx: Any, data: Any) -> Any:
    state: dict[str, Any] = {"n": 0, "last": None}

    def incr_update(request_id: str) -> int:
        state["n"] += 1
        state["last"] = request_id
        return int(state["n"])

    def incr_signal(payload: Any) -> None:
        state["n"] += 1
        state["last"] = payload["id"]

    ctx.on_update("incr", incr_update)
    ctx.on_signal("incr", incr_signal)
    ctx.on_query("seen", lambda: dict(state))
    yield ctx.wait_for_signal("stop")
    return state["n"]
