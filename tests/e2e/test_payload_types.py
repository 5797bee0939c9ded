"""Payload types (issue #14 item 5): dataclasses (and pydantic v2 models when
pydantic is importable) as workflow and activity arguments and results.

The contract: at every durable boundary the instance becomes its plain JSON
value (``payload_types.to_json_value``); the workflow receives that value, the
same live and on replay. An activity's *arguments* never cross a boundary:
the activity gets what the body passed.
"""

from __future__ import annotations

import dataclasses
import sys
import types
from datetime import UTC, datetime
from decimal import Decimal

import pytest

from tests.e2e.helpers import latest
from weft_django import activity, client, workflow
from weft_django.engine import Engine
from weft_django.engine.replay.sandbox import json_copy
from weft_django.engine.workflow.payload import dumps, normalize
from weft_django.engine.workflow.payload_types import to_json_value
from weft_django.errors import PayloadError

SEEN: list[object] = []


@dataclasses.dataclass(frozen=True)
class Item:
    sku: str
    qty: int


@dataclasses.dataclass
class Order:
    order_id: str
    items: list[Item]
    placed: datetime
    total: Decimal
    note: str | None = None


@dataclasses.dataclass
class Receipt:
    order_id: str
    charged: int
    lines: tuple[Item, ...]


@activity(name="payload-types-charge")
def charge(order: Order) -> Receipt:
    SEEN.append(order)
    return Receipt(order.order_id, sum(i.qty for i in order.items) * 10, tuple(order.items))


@workflow(name="payload-types-checkout")
def checkout(ctx, data):
    order = Order(
        data["order_id"],
        [Item(**line) for line in data["items"]],
        datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC),
        Decimal("12.50"),
    )
    receipt = yield ctx.run(charge, order)
    SEEN.append(("receipt", receipt))
    got = yield ctx.wait_for_signal("confirm")
    SEEN.append(("signal", got))
    return Receipt(receipt["order_id"], receipt["charged"] + got["tip"], ())


def test_conversion_is_asdict_recursive_and_keeps_plain_json():
    order = Order("o-1", [Item("a", 2)], datetime(2026, 1, 2, tzinfo=UTC), Decimal("1.5"))
    assert to_json_value(order) == {
        "order_id": "o-1",
        "items": [{"sku": "a", "qty": 2}],
        "placed": datetime(2026, 1, 2, tzinfo=UTC),
        "total": Decimal("1.5"),
        "note": None,
    }
    assert normalize("x", {"o": order, "t": (Item("b", 1),)}) == {
        "o": {
            "order_id": "o-1",
            "items": [{"sku": "a", "qty": 2}],
            "placed": "2026-01-02T00:00:00Z",
            "total": "1.5",
            "note": None,
        },
        "t": [{"sku": "b", "qty": 1}],
    }
    # the replay's copy and the stored copy agree
    assert json_copy(order) == normalize("x", order)
    plain = {"a": [1, "b", None, True, 2.5]}
    assert to_json_value(plain) == plain


def test_bad_values_inside_a_dataclass_are_refused_by_name():
    with pytest.raises(PayloadError, match="nan"):
        dumps("workflow input", Item("a", float("nan")))  # type: ignore[arg-type]
    with pytest.raises(PayloadError, match="u0000"):
        dumps("workflow input", Item("a\x00", 1))
    with pytest.raises(PayloadError, match="MAX_PAYLOAD_BYTES"):
        dumps("workflow input", Item("a" * 100, 1), max_bytes=50)


def test_unsupported_values_keep_the_clear_error():
    class Opaque:
        pass

    with pytest.raises(PayloadError, match="Opaque"):
        dumps("workflow input", {"x": Opaque()})
    with pytest.raises(PayloadError, match="type"):  # the dataclass class, not an instance
        dumps("workflow input", Item)
    with pytest.raises(TypeError, match="Opaque"):
        json_copy(Opaque())


@pytest.mark.django_db(transaction=True)
def test_dataclass_through_activity_workflow_and_signal_live_and_on_replay(clock):
    SEEN.clear()
    engine = Engine(clock=clock, background_tasks="manual").boot()
    try:
        handle = client.start(
            "payload-types-checkout",
            {"order_id": "o-7", "items": [Item("a", 2), Item("b", 1)]},
            workflow_id="payload-1",
        )
        # the stored input is the JSON value
        assert latest("payload-1").input == {
            "order_id": "o-7",
            "items": [{"sku": "a", "qty": 2}, {"sku": "b", "qty": 1}],
        }
        engine.run_until_idle()
        assert handle.status() == "parked", handle.error()
        # the activity got the instance the body built
        assert isinstance(SEEN[0], Order)
        assert SEEN[0].items == [Item("a", 2), Item("b", 1)]
        receipt_json = {
            "order_id": "o-7",
            "charged": 30,
            "lines": [{"sku": "a", "qty": 2}, {"sku": "b", "qty": 1}],
        }
        # the body got the JSON value, live
        assert SEEN[1] == ("receipt", receipt_json)
        SEEN.clear()
        # a fresh engine (nothing in memory) replays the journal from the start
        engine.dispose(grace=0)
        engine = Engine(clock=clock, background_tasks="manual").boot()
        client.signal("payload-1", "confirm", {"tip": 5})
        engine.run_until_idle()
        assert handle.status() == "completed", handle.error()
        # on replay the body saw the same JSON value, and the activity did not run again
        assert [("receipt", receipt_json), ("signal", {"tip": 5})] == SEEN
        assert handle.result(timeout=1) == {"order_id": "o-7", "charged": 35, "lines": []}
    finally:
        engine.dispose(grace=0)


@workflow(name="payload-types-signal")
def typed_signal(ctx, data):
    got = yield ctx.wait_for_signal("item")
    return {"got": got, "input": data}


@pytest.mark.django_db(transaction=True)
def test_dataclass_workflow_input_and_signal_payload(clock):
    engine = Engine(clock=clock, background_tasks="manual").boot()
    try:
        handle = client.start("payload-types-signal", Item("in", 1), workflow_id="payload-2")
        engine.run_until_idle()
        client.signal("payload-2", "item", Item("sig", 3))
        engine.run_until_idle()
        assert handle.status() == "completed", handle.error()
        assert handle.result(timeout=1) == {
            "got": {"sku": "sig", "qty": 3},
            "input": {"sku": "in", "qty": 1},
        }
    finally:
        engine.dispose(grace=0)


def test_pydantic_models_use_model_dump_json_mode():
    import pydantic

    class Line(pydantic.BaseModel):
        sku: str
        when: datetime

    class Cart(pydantic.BaseModel):
        lines: list[Line]

    cart = Cart(lines=[Line(sku="a", when=datetime(2026, 1, 2, tzinfo=UTC))])
    assert to_json_value(cart) == cart.model_dump(mode="json")
    assert normalize("x", {"cart": cart}) == {"cart": cart.model_dump(mode="json")}
    assert json_copy(Item("a", 1)) == {"sku": "a", "qty": 1}


def test_the_pydantic_path_with_a_stand_in_module(monkeypatch):
    """A stand-in ``pydantic`` module exercises the detection: an instance of
    ``sys.modules["pydantic"].BaseModel`` is dumped with
    ``model_dump(mode="json")``; a v1-style model without it is not."""

    calls: list[str] = []

    class BaseModel:
        def model_dump(self, *, mode: str) -> dict:
            calls.append(mode)
            return {"dumped": True}

    class V1Model:
        pass

    fake = types.ModuleType("pydantic")
    fake.BaseModel = BaseModel  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "pydantic", fake)
    assert normalize("x", {"m": BaseModel()}) == {"m": {"dumped": True}}
    assert calls == ["json"]
    with pytest.raises(PayloadError, match="V1Model"):
        dumps("x", V1Model())
