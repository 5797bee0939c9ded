"""Which weft queues a Celery node serves, read from its ``-Q`` / ``-X``
(``transports.celery.served``), and where a queued run's pickup is sent."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

pytest.importorskip("celery")

from weft_django.transports.celery import messages
from weft_django.transports.celery.identity import NodeIdentity
from weft_django.transports.celery.opt_in import decide
from weft_django.transports.celery.served import Served, celery_queue, consumed_for, served_by

DECLARED = ("reports", "emails", "a.b:c-d")


def _served(selected: list[str] | None, excluded: tuple[str, ...] = ()) -> Served:
    return served_by(selected, excluded, declared=DECLARED, shared_queue="weft")


def test_the_celery_queue_of_a_weft_queue() -> None:
    assert celery_queue("weft", "reports") == "weft.q.reports"
    assert celery_queue("jobs", "a.b:c-d") == "jobs.q.a.b:c-d"


@pytest.mark.parametrize("selected", [None, ["weft"], ["weft", "celery"], ["emails"]])
def test_naming_no_weft_queue_serves_every_declared_one(selected: list[str] | None) -> None:
    assert _served(selected) == Served(None)


def test_naming_weft_queues_serves_those_only() -> None:
    assert _served(["weft.q.reports"]).queues == {"reports"}
    assert _served(["weft", "weft.q.reports", "weft.q.a.b:c-d"]).queues == {"reports", "a.b:c-d"}
    assert _served(["weft.q.reports", "weft.q.emails"], ("weft.q.emails",)).queues == {"reports"}


def test_excluding_weft_queues_serves_the_rest() -> None:
    assert _served(None, ("weft.q.emails",)).queues == {"reports", "a.b:c-d"}
    assert _served(["weft"], ("weft.q.emails", "weft.q.reports")).queues == {"a.b:c-d"}


def test_an_undeclared_name_maps_to_nothing_and_is_reported() -> None:
    served = _served(["weft.q.reports", "weft.q.nope"])
    assert served.queues == {"reports"} and served.unknown == ("weft.q.nope",)
    only_unknown = _served(["weft.q.nope"])
    assert only_unknown.queues == frozenset() and only_unknown.unknown == ("weft.q.nope",)
    assert only_unknown.describe() == "no declared queue"
    assert _served(["weft.q."]).queues is None  # the bare prefix names no queue


def test_the_queues_a_node_consumes() -> None:
    assert consumed_for(Served(None), declared=DECLARED, shared_queue="weft") == [
        "weft",
        "weft.q.a.b:c-d",
        "weft.q.emails",
        "weft.q.reports",
    ]
    served = Served(frozenset({"reports"}))
    assert consumed_for(served, declared=DECLARED, shared_queue="weft") == [
        "weft",
        "weft.q.reports",
    ]


def test_a_weft_queues_celery_queue_opts_a_node_in() -> None:
    decision = decide(
        flag=None, selected=["weft.q.reports"], excluded=(), queue="weft", engine_queues=("weft",)
    )
    assert decision.engine and "'weft.q.reports'" in decision.why
    other = decide(
        flag=None, selected=["emails"], excluded=(), queue="weft", engine_queues=("weft",)
    )
    assert not other.engine and "weft.q.<weft queue>" in other.why


def test_the_served_queues_reach_the_pool_processes() -> None:
    ident = NodeIdentity("e", "n@h", "prefork", 1, 2, frozenset({"b", "a"}))
    assert NodeIdentity.from_env(ident.to_env()) == ident
    every = NodeIdentity("e", "n@h", "prefork", 1, 2)
    assert NodeIdentity.from_env(every.to_env()) == every
    older = '{"e": "e", "n": "n@h", "p": "solo", "m": 1}'  # a node booted before the key
    parsed = NodeIdentity.from_env(older)
    assert parsed is not None and parsed.served_queues is None


def test_a_queued_runs_pickup_goes_to_its_queues_celery_queue(monkeypatch) -> None:
    sent: list[Any] = []
    app = SimpleNamespace(send_task=lambda name, **kw: sent.append(kw["queue"]))
    monkeypatch.setattr(messages.installation, "current", messages.Installed(app, "weft"))  # type: ignore[arg-type]
    assert messages.send_pickup("r1", weft_queue="reports")
    assert messages.send_pickup("r2")
    assert sent == ["weft.q.reports", "weft"]


def test_a_start_wake_names_its_queue_and_no_row_is_read() -> None:
    from weft_django.engine.wakes import Wake
    from weft_django.transports.celery.wakes import declared_queue_of

    declared = {"reports": object()}
    # "nowhere": a database alias that does not exist -- reading it would raise.
    assert declared_queue_of(Wake("start", "r", "nowhere", queue="reports"), declared) == "reports"
    assert declared_queue_of(Wake("start", "r", "nowhere", queue=""), declared) is None
    assert declared_queue_of(Wake("start", "r", "nowhere", queue="gone"), declared) is None
    assert declared_queue_of(Wake("start", "r", "nowhere"), {}) is None
