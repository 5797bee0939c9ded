"""``client.update`` / ``ctx.on_update`` (issue #18 part 3), on SQLite and PostgreSQL.

What could fail: an update applied twice for one ``update_id`` (a second
call, a replay), a rejected or unknown update that leaves a row or a journal
entry behind, a generator handler whose commands or answer do not replay in
place, a caller that waits forever (a finished run, no engine). The caller
blocks until the owner answers, so it runs in a thread while the test drives
the engine.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from tests.e2e.helpers import journal, latest, row_counts
from weft_django import activity, client, workflow
from weft_django.engine.replay.errors_codec import RecordedError
from weft_django.errors import (
    InvalidTransitionError,
    UnknownUpdate,
    UpdateRejected,
    WorkflowNotFound,
    WorkflowTimeoutError,
)
from weft_django.models import UpdateRequest

pytestmark = pytest.mark.django_db(transaction=True)

CALLS: list[str] = []


@activity(name="upd-price")
def upd_price(item: str) -> int:
    CALLS.append(item)
    return len(item) * 10


@workflow(name="upd-cart")
def upd_cart(ctx: Any, data: Any) -> Any:
    items: list[str] = []

    def validate(item: Any) -> None:
        if not isinstance(item, str) or not item:
            raise ValueError("item must be a non-empty string")
        if item in items:
            raise ValueError(f"{item} is already in the cart")

    def add(item: str) -> int:
        items.append(item)
        return len(items)

    def add_priced(item: str) -> Any:
        price = yield ctx.run(upd_price, item)
        items.append(item)
        return {"count": len(items), "price": price}

    def boom() -> None:
        raise KeyError("no such thing")

    ctx.on_update("add", add, validator=validate)
    ctx.on_update("add-priced", add_priced)
    ctx.on_update("boom", boom)
    ctx.on_query("items", lambda: list(items))
    yield ctx.wait_for_signal("checkout")
    return items


class Caller:
    """``client.update`` in a thread (it waits for the engine the test drives)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.result: Any = None
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._call, args=args, kwargs=kwargs)
        self.thread.start()

    def _call(self, *args: Any, **kwargs: Any) -> None:
        from django.db import connection

        try:
            self.result = client.update(*args, **kwargs)
        except BaseException as exc:
            self.error = exc
        finally:
            connection.close()

    def drive(self, env: Any, deadline_s: float = 60.0) -> Any:
        deadline = time.monotonic() + deadline_s
        while self.thread.is_alive():
            assert time.monotonic() < deadline, "the update was not answered"
            env.run_until_idle()
            self.thread.join(0.02)
        if self.error is not None:
            raise self.error
        return self.result


def _started(env: Any, workflow_id: str) -> None:
    client.start("upd-cart", None, workflow_id=workflow_id)
    env.run_until_idle()
    assert latest(workflow_id).status == "parked"


def test_update_returns_the_handler_result_and_changes_the_state(weft_env: Any) -> None:
    _started(weft_env, "upd-1")
    assert Caller("upd-1", "add", "apple").drive(weft_env) == 1
    assert Caller("upd-1", "add", "pear").drive(weft_env) == 2
    assert client.query("upd-1", "items") == ["apple", "pear"]  # a replay sees both
    kinds = [kind for kind, _ in journal(latest("upd-1"))]
    assert kinds.count("update") == 2 and kinds.count("update-done") == 2
    client.signal("upd-1", "checkout", None)
    weft_env.run_until_idle()
    assert client.get_handle("upd-1").result(timeout=5) == ["apple", "pear"]


def test_the_same_update_id_is_applied_once(weft_env: Any) -> None:
    _started(weft_env, "upd-2")
    first = Caller("upd-2", "add", "fig", update_id="u-1").drive(weft_env)
    again = Caller("upd-2", "add", "fig", update_id="u-1").drive(weft_env)
    assert first == again == 1
    assert client.query("upd-2", "items") == ["fig"]
    assert UpdateRequest.objects.filter(run__workflow_id="upd-2").count() == 1
    # The recorded answer, even with the engine gone: nothing runs again.
    assert client.update("upd-2", "add", "fig", update_id="u-1", timeout=0) == 1


def test_a_rejected_update_leaves_no_trace(weft_env: Any) -> None:
    _started(weft_env, "upd-3")
    before = (row_counts(), journal(latest("upd-3")))
    with pytest.raises(UpdateRejected, match="non-empty string") as info:
        client.update("upd-3", "add", "")
    assert info.value.code == "update_rejected" and info.value.http_status == 422
    assert (row_counts(), journal(latest("upd-3"))) == before
    assert not UpdateRequest.objects.exists()
    # The validator sees the workflow's state (read-only replay).
    Caller("upd-3", "add", "kiwi").drive(weft_env)
    with pytest.raises(UpdateRejected, match="already in the cart"):
        client.update("upd-3", "add", "kiwi")
    assert UpdateRequest.objects.count() == 1


def test_an_unknown_update_or_workflow_is_refused_without_writing(weft_env: Any) -> None:
    _started(weft_env, "upd-4")
    before = row_counts()
    with pytest.raises(UnknownUpdate, match="add-priced") as info:
        client.update("upd-4", "nope")
    assert info.value.http_status == 404 and info.value.registered == ["add", "add-priced", "boom"]
    with pytest.raises(WorkflowNotFound):
        client.update("upd-missing", "add", "x")
    with pytest.raises(ValueError, match="update_id"):
        client.update("upd-4", "add", "x", update_id="")
    assert row_counts() == before


def test_a_generator_handler_runs_commands_and_replays_in_place(weft_env: Any) -> None:
    CALLS.clear()
    _started(weft_env, "upd-5")
    answer = Caller("upd-5", "add-priced", "plum").drive(weft_env)
    assert answer == {"count": 1, "price": 40}
    assert Caller("upd-5", "add", "lime").drive(weft_env) == 2
    assert CALLS == ["plum"]
    kinds = [kind for kind, _ in journal(latest("upd-5"))]
    assert kinds[:3] == ["update", "activity", "update-done"]
    assert client.query("upd-5", "items") == ["plum", "lime"]
    client.signal("upd-5", "checkout", None)
    weft_env.run_until_idle()
    assert client.get_handle("upd-5").result(timeout=5) == ["plum", "lime"]
    assert CALLS == ["plum"]


def test_a_failing_handler_answers_with_its_error(weft_env: Any) -> None:
    _started(weft_env, "upd-6")
    with pytest.raises(RecordedError, match="KeyError"):
        Caller("upd-6", "boom").drive(weft_env)
    assert latest("upd-6").status == "parked"  # the run goes on


def test_no_engine_times_out_and_the_update_stays_accepted(weft_env: Any) -> None:
    _started(weft_env, "upd-7")
    with pytest.raises(WorkflowTimeoutError, match="update 'add'"):
        client.update("upd-7", "add", "date", update_id="late", timeout=0.2)
    assert UpdateRequest.objects.filter(update_id="late").count() == 1
    assert Caller("upd-7", "add", "date", update_id="late").drive(weft_env) == 1


def test_a_finished_run_refuses_updates(weft_env: Any) -> None:
    _started(weft_env, "upd-8")
    client.signal("upd-8", "checkout", None)
    weft_env.run_until_idle()
    with pytest.raises(InvalidTransitionError, match="completed"):
        client.update("upd-8", "add", "x")


def test_update_refuses_to_wait_inside_a_transaction(weft_env: Any) -> None:
    from django.db import transaction

    _started(weft_env, "upd-9")
    with transaction.atomic(), pytest.raises(RuntimeError, match="transaction"):
        client.update("upd-9", "add", "x")
    with transaction.atomic(), pytest.raises(WorkflowTimeoutError):  # submit only
        client.update("upd-9", "add", "x", update_id="in-tx", timeout=0)
    assert Caller("upd-9", "add", "x", update_id="in-tx").drive(weft_env) == 1


def test_aupdate_is_the_async_twin(weft_env: Any) -> None:
    import asyncio

    _started(weft_env, "upd-10")

    class AsyncCaller(Caller):
        def _call(self, *args: Any, **kwargs: Any) -> None:
            from asgiref.sync import sync_to_async
            from django.db import connection, connections

            async def call() -> Any:
                try:
                    return await client.aupdate(*args, **kwargs)
                finally:  # the twin ran in asgiref's sync thread: close its connection
                    await sync_to_async(connections.close_all, thread_sensitive=True)()

            try:
                self.result = asyncio.run(call())
            except BaseException as exc:
                self.error = exc
            finally:
                connection.close()

    assert AsyncCaller("upd-10", "add", "pear", update_id="a-1").drive(weft_env) == 1
    assert client.aupdate.__name__ == "aupdate"
