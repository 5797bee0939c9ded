"""``WorkflowHandle`` carries the actions on its workflow.

Protects: each handle method is the module function of the same name on the
handle's workflow id (and its ``a…`` twin the same call, awaited), so a
caller holding a handle needs no second way to address the run.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from weft_django import client, workflow


@workflow(name="hd-wait")
def hd_wait(ctx: Any, data: Any) -> Any:
    seen: list[Any] = []
    ctx.on_query("seen", lambda: list(seen))
    seen.append((yield ctx.wait_for_signal("go")))
    seen.append((yield ctx.wait_for_signal("go")))
    return seen


pytestmark = [pytest.mark.django_db(transaction=True)]


def test_the_handle_signals_queries_and_cancels(weft_env: Any) -> None:
    handle = client.start("hd-wait", None, workflow_id="hd-1")
    weft_env.run_until_idle()
    handle.signal("go", 1)
    weft_env.run_until_idle()
    assert handle.query("seen") == [1] == asyncio.run(handle.aquery("seen"))
    asyncio.run(handle.asignal("go", 2))
    weft_env.run_until_idle()
    assert handle.result(timeout=1) == [1, 2]

    other = client.start("hd-wait", None, workflow_id="hd-2")
    weft_env.run_until_idle()
    assert other.ownership() == client.ownership_status("hd-2")
    other.cancel("enough")
    weft_env.run_until_idle()
    assert other.status() == "cancelled"
