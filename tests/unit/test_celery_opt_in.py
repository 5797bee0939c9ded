"""The Celery opt-in rule (``transports.celery.opt_in``; issue #19 part 1)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

pytest.importorskip("celery")

from weft_django.transports.celery.opt_in import decide, worker_options


def _decide(flag=None, selected=None, excluded=(), engine_queues=("weft",)):
    return decide(
        flag=flag, selected=selected, excluded=excluded, queue="weft", engine_queues=engine_queues
    )


def test_a_node_for_other_work_is_not_an_engine() -> None:
    decision = _decide(selected=["emails"])
    assert not decision.engine
    assert "-Q emails" in decision.why and "--weft" in decision.why


@pytest.mark.parametrize("selected", [["weft"], ["emails", "weft"], ["weft", "celery"]])
def test_naming_the_weft_queue_opts_in(selected: list[str]) -> None:
    assert _decide(selected=selected).engine


def test_without_q_every_queue_is_consumed_the_weft_one_too_unless_excluded() -> None:
    assert _decide().engine
    assert _decide(excluded=["emails"]).engine
    assert not _decide(excluded=["weft"]).engine


def test_engine_queues_name_the_queues_whose_consumers_are_engines() -> None:
    assert _decide(selected=["default"], engine_queues=("weft", "default")).engine
    assert not _decide(selected=["emails"], engine_queues=("weft", "default")).engine


def test_the_worker_option_wins_both_ways() -> None:
    assert _decide(flag=True, selected=["emails"]).engine
    assert not _decide(flag=False).engine
    assert not _decide(flag=False, selected=["weft"]).engine


def test_the_options_of_celeryd_init_are_remembered_by_hostname() -> None:
    worker_options.remember(sender="n1@h", options={"queues": "emails,mail", "exclude_queues": []})
    worker_options.remember(sender="n2@h", options={"queues": None, "exclude_queues": ["weft"]})
    assert worker_options.of(SimpleNamespace(hostname="n1@h")) == (["emails", "mail"], [])
    assert worker_options.of(SimpleNamespace(hostname="n2@h")) == (None, ["weft"])
