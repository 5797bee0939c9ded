"""Sagas (issue #17 part 4): compensations in reverse order, on failure and on
cancellation, recorded like any activity, failures reported after all ran."""

from __future__ import annotations

from datetime import timedelta

import pytest

from tests.e2e.helpers import journal, latest
from weft_django import SagaCompensationError, WorkflowCancelled, activity, client, workflow

RAN: list[str] = []
FLAKY: dict[str, int] = {}


@pytest.fixture(autouse=True)
def _reset():
    RAN.clear()
    FLAKY.clear()


def settle(env) -> None:
    env.run_until_idle()
    env.advance(env.engine.settings.claim_renew_interval_ms / 1000)
    env.run_until_idle()


class PaymentDeclined(Exception):
    pass


class Stuck(Exception):
    pass


@activity()
def reserve_stock(order: str) -> str:
    RAN.append(f"reserve {order}")
    return "reserved"


@activity()
def release_stock(order: str) -> None:
    RAN.append(f"release {order}")


@activity()
def charge(order: str) -> str:
    RAN.append(f"charge {order}")
    return "charged"


@activity(non_retryable=(PaymentDeclined,))
def charge_declined(order: str) -> str:
    RAN.append(f"charge declined {order}")
    raise PaymentDeclined("card declined")


@activity()
def refund(order: str) -> None:
    RAN.append(f"refund {order}")


@activity(non_retryable=(Stuck,))
def refund_stuck(order: str) -> None:
    RAN.append(f"refund stuck {order}")
    raise Stuck("gateway down")


@activity(retries=2, backoff=0)
def refund_flaky(order: str) -> None:
    FLAKY[order] = FLAKY.get(order, 0) + 1
    RAN.append(f"refund flaky {order} #{FLAKY[order]}")
    if FLAKY[order] < 2:
        raise RuntimeError("try again")


@workflow(name="saga-fails")
def saga_fails(ctx, order):
    saga = ctx.saga()
    try:
        yield ctx.run(reserve_stock, order)
        saga.add(release_stock, order)
        yield ctx.run(charge, order)
        saga.add(refund, order)
        yield ctx.run(charge_declined, order)
    except Exception:
        outcomes = yield from saga.compensate()
        return {"compensated": outcomes}
    return "unreachable"


@workflow(name="saga-cancelled")
def saga_cancelled(ctx, order):
    saga = ctx.saga()
    try:
        yield ctx.run(reserve_stock, order)
        saga.add(release_stock, order)
        yield ctx.run(charge, order)
        saga.add(refund, order)
        yield ctx.wait_for_signal("shipped", timeout=timedelta(days=1))
    except WorkflowCancelled:
        yield from saga.compensate()
        raise
    return "shipped"


@workflow(name="saga-stuck")
def saga_stuck(ctx, order):
    saga = ctx.saga()
    try:
        yield ctx.run(reserve_stock, order)
        saga.add(release_stock, order)
        yield ctx.run(charge, order)
        saga.add(refund_stuck, order)
        saga.add(refund_flaky, order)
        yield ctx.run(charge_declined, order)
    except Exception as exc:
        if isinstance(exc, SagaCompensationError):
            raise
        yield from saga.compensate()
    return "unreachable"


@pytest.mark.django_db(transaction=True)
def test_on_failure_compensations_run_in_reverse_order_each_recorded(weft_env):
    h = client.start("saga-fails", "o1", workflow_id="saga-f")
    weft_env.run_until_idle()
    assert h.status() == "completed", h.error()
    assert RAN == ["reserve o1", "charge o1", "charge declined o1", "refund o1", "release o1"]
    assert h.result(timeout=1) == {
        "compensated": [
            {"compensation": "tests.e2e.test_saga.refund", "status": "ok", "error": None},
            {"compensation": "tests.e2e.test_saga.release_stock", "status": "ok", "error": None},
        ]
    }
    targets = [target for kind, target in journal(latest("saga-f")) if kind == "activity"]
    assert [t.rsplit(".", 1)[-1] for t in targets] == [
        "reserve_stock",
        "charge",
        "charge_declined",
        "refund",
        "release_stock",
    ]


@pytest.mark.django_db(transaction=True)
def test_on_cancel_with_grace_compensations_run_once_in_reverse(weft_env):
    client.start("saga-cancelled", "o2", workflow_id="saga-c")
    weft_env.run_until_idle()
    assert latest("saga-c").status == "parked"
    client.cancel("saga-c", "customer cancelled", grace=60)
    settle(weft_env)
    run = latest("saga-c")
    assert run.status == "cancelled"
    assert run.error == {"type": "Cancelled", "message": "customer cancelled"}
    assert RAN == ["reserve o2", "charge o2", "refund o2", "release o2"]
    # A later pass replays nothing again.
    weft_env.advance(timedelta(days=2))
    weft_env.run_until_idle()
    assert RAN == ["reserve o2", "charge o2", "refund o2", "release o2"]


@pytest.mark.django_db(transaction=True)
def test_a_failing_compensation_is_retried_then_reported_with_the_others(weft_env):
    h = client.start("saga-stuck", "o3", workflow_id="saga-s")
    weft_env.run_until_idle()
    for _ in range(3):  # the flaky refund's retry backoff (0 s) and its timer
        weft_env.advance(1)
        weft_env.run_until_idle()
    assert h.status() == "failed", h.error()
    error = h.error()
    assert error["type"] == "SagaCompensationError"
    outcomes = error["fields"]["outcomes"]
    assert [(o["compensation"].rsplit(".", 1)[-1], o["status"]) for o in outcomes] == [
        ("refund_flaky", "ok"),
        ("refund_stuck", "failed"),
        ("release_stock", "ok"),
    ]
    assert "gateway down" in outcomes[1]["error"]
    # Every compensation ran although one failed; the flaky one ran twice (a retry).
    assert RAN[3:] == [
        "refund flaky o3 #1",
        "refund flaky o3 #2",
        "refund stuck o3",
        "release o3",
    ]


def test_saga_add_refuses_what_is_not_an_activity():
    from weft_django.engine.workflow.saga import Saga

    class Ctx:
        workflow_id = "x"

    with pytest.raises(TypeError, match="not_an_activity"):
        Saga(Ctx()).add("not_an_activity")  # type: ignore[arg-type]
