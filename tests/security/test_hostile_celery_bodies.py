"""Hostile Celery message bodies: discarded with one warning, nothing read or written.

Invariant protected: whatever a broker delivers to ``weft.drive``,
``weft.pickup`` or ``weft.run_routed_activity`` -- a wrong arity, a run id
that is not a UUID, an epoch that is a string or out of range, a routed
message missing fields or with a token of the wrong type, arbitrary JSON --
the task body returns ``outcome: malformed`` after ONE warning on
``weft_django.transports.celery`` naming the task and what was wrong (never
a routed message's token), runs no query and writes nothing; the task never
raises, so the worker never logs a crash and its node keeps going. A
well-formed message outside a weft node is still refused as before
(``no-node``), so the checks do not swallow valid traffic.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from celery import Celery
from django.db import connection
from django.test.utils import CaptureQueriesContext
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.e2e.helpers import row_counts
from weft_django import client, workflow
from weft_django.transports.celery import DRIVE_TASK, PICKUP_TASK, ROUTED_TASK, install, uninstall
from weft_django.transports.celery.message_checks import parse_routed

RUN = str(uuid.uuid4())


@workflow(name="hostile-celery-wait")
def _wait(ctx: Any, data: Any) -> Any:
    return (yield ctx.wait_for_signal("go"))


GOOD_DRIVE = ([RUN, "signal", "node-a:1:abc", 3], {"via": "celery", "workflow_id": "w-1"})
TOKEN = "s3cr3t-t0ken-" + "k" * 30
GOOD_ROUTED = {
    "token": TOKEN,
    "activity": "charge",
    "queue": "payments",
    "args": [1],
    "kwargs": {"k": "v"},
    "workflow_id": "w-1",
    "run_id": RUN,
    "position": 2,
    "attempt": 1,
    "epoch": 4,
    "idempotency_key": "w-1:2",
    "deadline_ms": None,
    "trace_context": None,
}


@pytest.fixture
def app() -> Iterator[Celery]:
    made = Celery("weft-hostile-bodies", set_as_current=False)
    install(made)
    try:
        yield made
    finally:
        uninstall()


def _call(app: Celery, task: str, args: list[Any], kwargs: dict[str, Any]) -> Any:
    return app.tasks[task](*args, **kwargs)


DRIVE_CASES = [
    pytest.param([], {}, "4 positional", id="no-args"),
    pytest.param([RUN, "signal", "e"], {}, "got 3", id="three-args"),
    pytest.param([RUN, "signal", "e", 1, 2], {}, "got 5", id="five-args"),
    pytest.param(["not-a-uuid", "signal", "e", 1], {}, "run_id must be a UUID", id="bad-run"),
    pytest.param([None, "signal", "e", 1], {}, "run_id must be a str", id="null-run"),
    pytest.param(["x" * 10_000, "signal", "e", 1], {}, "run_id must be 1..36", id="huge-run"),
    pytest.param(["'; DROP TABLE x; --", None, "e", 1], {}, "UUID", id="sql-run"),
    pytest.param([RUN, 7, "e", 1], {}, "wake_kind must be a str", id="int-kind"),
    pytest.param([RUN, "signal", "", 1], {}, "engine_id must be 1..", id="empty-engine"),
    pytest.param([RUN, "signal", ["e"], 1], {}, "engine_id must be a str", id="list-engine"),
    pytest.param([RUN, "signal", "e" * 201, 1], {}, "engine_id must be 1..200", id="long-engine"),
    pytest.param([RUN, "signal", "e", "3"], {}, "epoch must be an int", id="str-epoch"),
    pytest.param([RUN, "signal", "e", True], {}, "epoch must be an int", id="bool-epoch"),
    pytest.param([RUN, "signal", "e", -1], {}, "epoch must be in", id="negative-epoch"),
    pytest.param([RUN, "signal", "e", 2**63], {}, "epoch must be in", id="huge-epoch"),
    pytest.param([RUN, "signal", "e", 1.5], {}, "epoch must be an int", id="float-epoch"),
    pytest.param([RUN, None, "e", 1], {"attempt": "x"}, "attempt must be an int", id="attempt"),
    pytest.param([RUN, None, "e", 1], {"attempt": 10**9}, "attempt must be in", id="attempts"),
    pytest.param([RUN, None, "e", 1], {"due_ms": -5}, "due_ms must be in", id="due"),
    pytest.param([RUN, None, "e", 1], {"via": {"a": 1}}, "via must be a str", id="via"),
    pytest.param([RUN, None, "e", 1], {"workflow_id": 5}, "workflow_id must be a str", id="wid"),
]


@pytest.mark.django_db
@pytest.mark.parametrize(("args", "kwargs", "reason"), DRIVE_CASES)
def test_a_malformed_drive_is_discarded_with_one_warning(
    app: Celery, caplog: pytest.LogCaptureFixture, args: list[Any], kwargs: dict, reason: str
) -> None:
    caplog.set_level(logging.WARNING, logger="weft_django.transports.celery")
    with CaptureQueriesContext(connection) as queries:
        result = _call(app, DRIVE_TASK, args, kwargs)
    assert result == {"outcome": "malformed", "workflow_id": "", "run_id": ""}
    assert len(queries) == 0
    warnings = [r for r in caplog.records if r.name == "weft_django.transports.celery"]
    assert len(warnings) == 1, [r.getMessage() for r in warnings]
    assert warnings[0].levelno == logging.WARNING
    assert DRIVE_TASK in warnings[0].getMessage()
    assert reason in warnings[0].getMessage()


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("args", "kwargs", "reason"),
    [
        ([], {}, "1 positional"),
        ([RUN, RUN], {}, "got 2"),
        (["0" * 37], {}, "run_id must be 1..36"),
        ([{"run_id": RUN}], {}, "run_id must be a str"),
        ([RUN], {"due_ms": "soon"}, "due_ms must be an int"),
        ([RUN], {"workflow_id": "w" * 201}, "workflow_id must be 1..200"),
        ([RUN], {"attempt": "again"}, "attempt must be an int"),
        ([RUN], {"attempt": -1}, "attempt must be in"),
        ([RUN], {"attempt": 10**9}, "attempt must be in"),
    ],
)
def test_a_malformed_pickup_is_discarded(
    app: Celery, caplog: pytest.LogCaptureFixture, args: list[Any], kwargs: dict, reason: str
) -> None:
    caplog.set_level(logging.WARNING, logger="weft_django.transports.celery")
    with CaptureQueriesContext(connection) as queries:
        result = _call(app, PICKUP_TASK, args, kwargs)
    assert result["outcome"] == "malformed"
    assert len(queries) == 0
    assert [reason in r.getMessage() for r in caplog.records] == [True]


def _routed(**changes: Any) -> dict[str, Any]:
    message = {**GOOD_ROUTED, **changes}
    return {k: v for k, v in message.items() if v is not _DROP}


_DROP = object()


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("args", "reason"),
    [
        ([], "1 positional"),
        (["a string"], "message must be an object"),
        ([[GOOD_ROUTED]], "message must be an object"),
        ([_routed(token=_DROP)], "lacks token"),
        ([_routed(run_id=_DROP, epoch=_DROP)], "lacks epoch, run_id"),
        ([_routed(token=12345)], "token must be a str"),
        ([_routed(args={"a": 1})], "args must be a list"),
        ([_routed(kwargs={"k": 1, "j": 2} | {"": 3})], None),  # empty key is still a str key
        ([_routed(kwargs=[1])], "kwargs must be an object"),
        ([_routed(run_id="../../etc/passwd")], "run_id must be a UUID"),
        ([_routed(position=-1)], "position must be in"),
        ([_routed(epoch="4")], "epoch must be an int"),
        ([_routed(deadline_ms=2**80)], "deadline_ms must be in"),
        ([_routed(trace_context={"traceparent": 1})], "trace_context must be"),
        ([_routed(activity="")], "activity must be 1.."),
    ],
)
def test_a_malformed_routed_message_is_discarded_without_its_token(
    app: Celery, caplog: pytest.LogCaptureFixture, args: list[Any], reason: str | None
) -> None:
    caplog.set_level(logging.INFO, logger="weft_django.transports.celery")
    if reason is None:  # a control: the shape is right
        assert parse_routed(tuple(args), {}).kwargs == args[0]["kwargs"]
        return
    with CaptureQueriesContext(connection) as queries:
        result = _call(app, ROUTED_TASK, args, {})
    assert result == "malformed"
    assert len(queries) == 0
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 1 and reason in messages[0], messages
    assert TOKEN not in messages[0]
    assert all(TOKEN not in repr(getattr(r, "weft", "")) for r in caplog.records)


@pytest.mark.django_db
def test_well_formed_messages_still_reach_the_task_body(
    app: Celery, caplog: pytest.LogCaptureFixture
) -> None:
    # Outside a weft node the body refuses them as before: the checks let them through.
    assert _call(app, DRIVE_TASK, *GOOD_DRIVE)["outcome"] == "no-node"
    assert _call(app, PICKUP_TASK, [RUN], {"future_option": 1})["outcome"] == "no-node"
    assert parse_routed((GOOD_ROUTED,), {}).token == TOKEN
    assert not [r for r in caplog.records if "malformed" in r.getMessage()]


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=40),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=12,
)


@pytest.mark.django_db
@settings(
    max_examples=100,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=list(HealthCheck),
)
@given(
    task=st.sampled_from([DRIVE_TASK, PICKUP_TASK, ROUTED_TASK]),
    args=st.lists(JSON, max_size=5),
    kwargs=st.dictionaries(st.sampled_from(["via", "due_ms", "attempt", "workflow_id", "x"]), JSON),
)
def test_arbitrary_json_bodies_never_raise_and_never_touch_the_database(
    app: Celery, task: str, args: list[Any], kwargs: dict[str, Any]
) -> None:
    with CaptureQueriesContext(connection) as queries:
        result = _call(app, task, args, kwargs)
    outcome = result if isinstance(result, str) else result["outcome"]
    assert outcome in ("malformed", "no-node", "stale"), result
    if outcome == "malformed":
        assert len(queries) == 0


@pytest.fixture
def in_a_node(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """This process as a weft Celery node's pool process (solo pool)."""
    import os

    from weft_django.transports.celery import identity as identity_module
    from weft_django.transports.celery.pool import state

    engine_id = f"hostile-node:{os.getpid()}:b00t"
    node = identity_module.NodeIdentity(engine_id, "hostile-node", "solo", os.getpid())
    monkeypatch.setattr(identity_module.minted, "current", node)
    yield engine_id
    state.reset()


@pytest.mark.django_db(transaction=True)
def test_well_formed_but_bogus_wakes_inside_a_node_write_nothing(
    app: Celery, in_a_node: str
) -> None:
    handle = client.start("hostile-celery-wait", None, workflow_id="hostile-cel-1")
    before = row_counts()
    # A run that does not exist, a stale epoch of another engine, an unknown wake kind.
    assert _call(app, DRIVE_TASK, [str(uuid.uuid4()), "signal", in_a_node, 3], {})["outcome"] == (
        "gone"
    )
    stale = _call(app, DRIVE_TASK, [handle.run_id, "no-such-kind", "other:1:x", 99], {})
    assert stale["outcome"] == "discarded"
    assert stale["workflow_id"] == "hostile-cel-1"
    assert _call(app, PICKUP_TASK, [str(uuid.uuid4())], {})["outcome"] == "not-pending"
    assert row_counts() == before
