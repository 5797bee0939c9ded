"""The saga the cancel-with-cleanup process test drives (``test_cancel_cleanup``).

Loaded by the test and by every engine child (``Worker(..., imports=IMPORTS)``).
Each activity writes a ``SideEffect`` row from the engine process *before* it
returns, so a crash can never hide an execution: the rows are the count of
how many times each step and each compensation ran.
"""

from __future__ import annotations

import time
from typing import Any

from weft_django import WorkflowCancelled, activity, workflow

IMPORTS = ("tests.engines.cancel_workflows",)

RESERVE = "cc-reserve"
CHARGE = "cc-charge"
REFUND = "cc-refund"
RELEASE = "cc-release"
PAUSE = "cc-pause"


def _record(kind: str, key: str) -> None:
    from project.demo.models import SideEffect

    SideEffect.objects.create(kind=kind, key=key)


@activity()
def cc_reserve_stock(key: str) -> str:
    _record(RESERVE, key)
    return "reserved"


@activity()
def cc_charge(key: str) -> str:
    _record(CHARGE, key)
    return "charged"


@activity()
def cc_refund(key: str) -> str:
    _record(REFUND, key)
    return "refunded"


@activity()
def cc_release_stock(key: str) -> str:
    _record(RELEASE, key)
    return "released"


@activity()
def cc_pause(key: str, seconds: float) -> None:
    """A compensation that takes a while (a slow gateway): where the test kills
    the engine. Its row is written first, so the test sees it started."""
    _record(PAUSE, key)
    time.sleep(seconds)


@workflow(name="procs-cancel-saga")
def procs_cancel_saga(ctx: Any, data: dict[str, Any]) -> Any:
    """Reserve, charge, wait to ship; on a cancel: refund, (pause), release."""
    key = data["id"]
    saga = ctx.saga()
    try:
        yield ctx.run(cc_reserve_stock, key)
        saga.add(cc_release_stock, key)
        saga.add(cc_pause, key, float(data["pause"]))
        yield ctx.run(cc_charge, key)
        saga.add(cc_refund, key)
        return (yield ctx.wait_for_signal("shipped"))
    except WorkflowCancelled:
        yield from saga.compensate()
        raise
