"""Durations in ``ctx`` and ``@activity`` go through ``weft_django.kernel.durations``:
an infinite or NaN duration is a ``ValueError`` that names the argument
(it was an ``OverflowError`` from ``round(inf)``)."""

from __future__ import annotations

import math
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

from weft_django.engine.workflow.commands import Sleep, WaitSignal
from weft_django.engine.workflow.context import SideEffectKind, WorkflowContext, duration_ms
from weft_django.engine.workflow.definitions import activity
from weft_django.kernel.durations import to_ms


class _Runtime:
    """The least a ``WorkflowContext`` needs (its ``WorkflowRuntime``)."""

    is_replaying = False

    def clock_ms(self) -> int:
        return 0

    def side_effect(self, kind: SideEffectKind, target: str, make: Callable[[], Any]) -> Any:
        return make()

    def patched(self, change_id: str) -> bool:
        return True


@pytest.fixture
def ctx() -> WorkflowContext:
    return WorkflowContext(_Runtime(), "wf", "run", "durations")


BAD = [math.inf, -math.inf, math.nan]


@pytest.mark.parametrize("value", BAD, ids=repr)
def test_ctx_sleep_refuses_infinite_and_nan(ctx: WorkflowContext, value: float) -> None:
    with pytest.raises(ValueError, match=r"ctx\.sleep duration"):
        ctx.sleep(value)


@pytest.mark.parametrize("value", BAD, ids=repr)
def test_wait_for_signal_timeout_refuses_infinite_and_nan(
    ctx: WorkflowContext, value: float
) -> None:
    with pytest.raises(ValueError, match="wait_for_signal timeout"):
        ctx.wait_for_signal("go", timeout=value)


@pytest.mark.parametrize("value", BAD, ids=repr)
def test_wait_until_and_async_timeouts_refuse_infinite_and_nan(
    ctx: WorkflowContext, value: float
) -> None:
    with pytest.raises(ValueError, match="wait_until timeout"):
        ctx.wait_until(lambda: True, timeout=value)
    with pytest.raises(ValueError, match="async timeout"):
        ctx.async_activity("outside", timeout=value)


@pytest.mark.parametrize("value", BAD, ids=repr)
def test_activity_timeout_refuses_infinite_and_nan(value: float) -> None:
    with pytest.raises(ValueError, match="activity timeout"):
        activity(name="durations-inf", timeout=value)


@pytest.mark.parametrize("value", BAD, ids=repr)
def test_activity_backoff_refuses_infinite_and_nan(value: float) -> None:
    with pytest.raises(ValueError, match="activity backoff"):
        activity(name="durations-inf", backoff=value)


def test_zero_and_finite_durations_still_work(ctx: WorkflowContext) -> None:
    assert ctx.sleep(0) == Sleep(0)
    assert ctx.sleep(timedelta(milliseconds=1500)) == Sleep(1500)
    assert ctx.wait_for_signal("go", timeout=0) == WaitSignal("go", 0)
    assert ctx.wait_for_signal("go") == WaitSignal("go", None)


def test_negative_and_non_numbers_keep_their_errors(ctx: WorkflowContext) -> None:
    with pytest.raises(ValueError, match="non-negative"):
        ctx.sleep(-1)
    with pytest.raises(TypeError, match=r"ctx\.sleep duration"):
        ctx.sleep("5")
    with pytest.raises(TypeError, match=r"ctx\.sleep duration"):
        ctx.sleep(True)


def test_duration_ms_is_the_one_parser() -> None:
    assert duration_ms(None, "x") is None
    assert duration_ms(2.5, "x") == to_ms(2.5, "x") == 2500
    with pytest.raises(ValueError, match="x must be a finite duration"):
        duration_ms(math.inf, "x")
