"""Workflows of the fencing-token process test (``test_fencing_tokens``).

Loaded by the test and by every engine child (``Worker(..., imports=IMPORTS)``).
``fencing_deposit`` adds 10 to a ``FencedAccount`` through ``fenced_update``
after sleeping ``FENCE_PAUSE_S`` seconds (the child's environment: the test
stalls one engine inside that sleep). Its evidence, written by the child as
``SideEffect`` rows keyed ``<account>:<epoch>``: ``fence-start`` when an
execution begins, then ``fence-applied`` or ``fence-refused``.
"""

from __future__ import annotations

import os
import time
from typing import Any

from weft_django import activity, activity_info, fenced_update, workflow

IMPORTS = ("tests.engines.fencing_workflows",)

STARTED = "fence-start"
APPLIED = "fence-applied"
REFUSED = "fence-refused"


def _record(kind: str, key: str) -> None:
    from project.demo.models import SideEffect

    SideEffect.objects.create(kind=kind, key=key)


@activity()
def fencing_deposit(name: str) -> str:
    from django.db.models import F

    from project.demo.models import FencedAccount

    info = activity_info()
    key = f"{name}:{info.epoch}"
    _record(STARTED, key)
    time.sleep(float(os.environ.get("FENCE_PAUSE_S", "0")))
    written = fenced_update(
        FencedAccount.objects.filter(name=name),
        balance=F("balance") + 10,
        writer=os.environ.get("FENCE_WRITER", ""),
    )
    _record(APPLIED if written else REFUSED, key)
    return key


@workflow(name="fencing-deposit")
def fencing_deposit_workflow(ctx: Any, data: dict[str, Any]) -> Any:
    return (yield ctx.run(fencing_deposit, data["account"]))
