"""A workflow whose activity raises from a helper two calls deep, with ``retries=2``,
loaded by the ``weft_worker`` child of the real-process log test
(``Worker(..., imports=IMPORTS)``); not a test module.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from tests.e2e import failing_helpers
from weft_django import activity, workflow

IMPORTS = ("tests.e2e.failing_workflows",)


@activity(name="proc-charge", retries=2, backoff=timedelta(milliseconds=200))
def proc_charge(card: str) -> None:
    failing_helpers.charge(card)


@workflow(name="proc-refund")
def proc_refund(ctx: Any, data: Any) -> Any:
    yield ctx.run(proc_charge, data["card"])
