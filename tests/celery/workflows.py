"""Workflows of the Celery tests, imported by the test process and, through
``celery worker -I tests.celery.workflows``, by every worker node.

Activities write ``SideEffect`` rows (kind ``celery``) so a test can count
how often each step really ran; the async activity hands its token out as a
``SideEffect`` of kind ``celery-token`` (key ``<key>|<token>``).
"""

from __future__ import annotations

from typing import Any

from weft_django import activity, workflow


def _record(kind: str, key: str) -> None:
    from project.demo.models import SideEffect

    SideEffect.objects.create(kind=kind, key=key)


@activity()
def celery_step(key: str) -> str:
    _record("celery", key)
    return key


@activity()
def celery_hand_out(token: str, key: str) -> None:
    _record("celery-token", f"{key}|{token}")


@workflow(name="celery-leaf")
def celery_leaf(ctx: Any, data: dict[str, Any]) -> Any:
    return (yield ctx.run(celery_step, f"{data['id']}:leaf"))


@workflow(name="celery-tour")
def celery_tour(ctx: Any, data: dict[str, Any]) -> Any:
    """One of each wake: a sleep, a signal, an async activity, a child."""
    key = data["id"]
    a = yield ctx.run(celery_step, f"{key}:a")
    yield ctx.sleep(float(data.get("sleep", 1.0)))
    go = yield ctx.wait_for_signal("go")
    paid = yield ctx.async_activity(celery_hand_out, key)
    child = yield ctx.start_child("celery-leaf", {"id": key})
    return {"a": a, "go": go, "paid": paid, "child": child}


@workflow(name="celery-waiter")
def celery_waiter(ctx: Any, data: dict[str, Any]) -> Any:
    """Parks on ``go``, runs one step, parks on ``finish``."""
    key = data["id"]
    go = yield ctx.wait_for_signal("go")
    step = yield ctx.run(celery_step, f"{key}:a")
    finish = yield ctx.wait_for_signal("finish")
    return {"go": go, "step": step, "finish": finish}


@workflow(name="celery-sleeper")
def celery_sleeper(ctx: Any, data: dict[str, Any]) -> Any:
    yield ctx.sleep(float(data["seconds"]))
    return (yield ctx.run(celery_step, f"{data['id']}:woke"))


def _refuse(payload: Any) -> None:
    raise ValueError(f"handler refuses {payload!r}")


@workflow(name="celery-bad-handler")
def celery_bad_handler(ctx: Any, data: dict[str, Any]) -> Any:
    """An ``on_signal`` handler that raises: the turn delivering the signal
    escapes (no command failed, so no workflow failure to record)."""
    ctx.on_signal("boom", _refuse)
    return (yield ctx.wait_for_signal("never"))
