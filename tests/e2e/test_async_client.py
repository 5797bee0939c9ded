"""The async client (issue #18 part 6): every ``a…`` twin, on SQLite and PostgreSQL.

What could fail here: a twin with another signature than its sync function
(``acancel`` must mirror ``client.cancel`` as it is at import time), a twin
that does not write what the sync call writes, and an ``aresult`` that blocks
the event loop while it waits -- measured by a coroutine that keeps ticking
while ``aresult`` waits for a run another thread finishes. On PostgreSQL the
wait must end on the ``weft_done`` announcement (the async waiter returned
``True``), not on a re-read.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Callable, Coroutine, Iterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.db import connection, connections

import tests.api.workflows as api_workflows
from tests.e2e.helpers import claim_epoch, latest
from weft_django import client, workflow
from weft_django.client import aio as aclient
from weft_django.engine.wakes import backends
from weft_django.errors import (
    InvalidTransitionError,
    PayloadError,
    UnknownWorkflowType,
    WorkflowFailedError,
    WorkflowNotFound,
)

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _close_sync_thread_connections() -> Iterator[None]:
    """The twins run in asgiref's sync thread; under ASGI Django closes that
    thread's connection at the end of each request, here the test does (an
    open session would keep the test database from being dropped)."""
    yield
    asyncio.run(sync_to_async(connections.close_all, thread_sensitive=True)())


@workflow(name="ac-echo")
def ac_echo(ctx: Any, data: Any) -> Any:
    return {"echo": data}


@workflow(name="ac-wait")
def ac_wait(ctx: Any, data: Any) -> Any:
    seen: list[Any] = []
    ctx.on_query("seen", lambda: list(seen))
    seen.append((yield ctx.wait_for_signal("go")))
    return {"got": seen}


@workflow(name="ac-boom")
def ac_boom(ctx: Any, data: Any) -> Any:
    raise ValueError("boom")


@workflow(name="ac-loop")
def ac_loop(ctx: Any, data: Any) -> Any:
    if data["n"] < 2:
        yield ctx.continue_as_new({"n": data["n"] + 1})
    return {"final": data["n"], "run": ctx.run_id}


def run(coro: Coroutine[Any, Any, Any]) -> Any:
    return asyncio.run(coro)


def _sync_functions() -> list[str]:
    names = []
    for name in client.__all__:
        value = getattr(client, name)
        # An async generator (``aread_stream``) is a twin, not a sync function.
        asynchronous = inspect.iscoroutinefunction(value) or inspect.isasyncgenfunction(value)
        if inspect.isfunction(value) and not asynchronous:
            names.append(name)
    return names


def test_every_public_sync_function_has_an_async_twin_with_its_signature() -> None:
    names = _sync_functions()
    assert {"start", "signal", "cancel", "query", "signal_with_start"} <= set(names)
    for name in names:
        twin = getattr(client, f"a{name}")
        # read_stream's twin is an async iterator (an async generator function).
        assert inspect.iscoroutinefunction(twin) or inspect.isasyncgenfunction(twin), name
        twin_sig, sync_sig = inspect.signature(twin), inspect.signature(getattr(client, name))
        if inspect.isasyncgenfunction(twin):  # Iterator vs AsyncIterator: the same parameters
            twin_sig = twin_sig.replace(return_annotation=sync_sig.return_annotation)
        assert twin_sig == sync_sig, name
        assert twin.__name__ == f"a{name}"
        assert f"a{name}" in client.__all__
    handle = client.WorkflowHandle
    for method in ("result", "status", "error"):
        assert inspect.iscoroutinefunction(getattr(handle, f"a{method}")), method
        sync = inspect.signature(getattr(handle, method))
        assert inspect.signature(getattr(handle, f"a{method}")) == sync, method


def test_asyncify_mirrors_whatever_signature_it_is_given() -> None:
    # What acancel relies on: the twin is bound to client.cancel as defined when
    # client.py is imported, so a cancel that gains grace=/force= keeps its twin in step.
    def cancel(workflow_id: str, reason: str = "", *, grace: float | None = None) -> Any:
        return (workflow_id, reason, grace)

    twin = aclient.asyncify(cancel)
    assert inspect.signature(twin) == inspect.signature(cancel)
    assert run(twin("w", "r", grace=2.0)) == ("w", "r", 2.0)
    assert inspect.signature(client.acancel) == inspect.signature(client.cancel)


def test_astart_aresult_astatus(weft_env: Any) -> None:
    handle = run(client.astart("ac-echo", {"n": 1}, workflow_id="ac-1"))
    assert isinstance(handle, client.WorkflowHandle)
    assert run(handle.astatus()) == "pending"
    weft_env.run_until_idle()
    assert run(handle.astatus()) == "completed"
    assert run(handle.aresult(timeout=1)) == {"echo": {"n": 1}}
    assert run(handle.aerror()) is None
    again = run(client.aget_handle("ac-1"))
    assert again == handle


def test_astart_refuses_what_start_refuses_and_writes_nothing() -> None:
    with pytest.raises(UnknownWorkflowType):
        run(client.astart("ac-no-such", None, workflow_id="ac-x"))
    with pytest.raises(ValueError, match="workflow_id"):
        run(client.astart("ac-echo", None, workflow_id="bad id with spaces"))
    with pytest.raises(PayloadError):
        run(client.astart("ac-echo", {1, 2}, workflow_id="ac-x"))
    with pytest.raises(WorkflowNotFound):
        run(client.aget_handle("ac-x"))


def test_asignal_aquery_and_aresult_of_a_failure(weft_env: Any) -> None:
    handle = run(client.astart("ac-wait", None, workflow_id="ac-2"))
    weft_env.run_until_idle()
    assert run(client.aquery("ac-2", "seen")) == []
    message = run(client.asignal("ac-2", "go", {"v": 7}))
    assert message.name == "go" and message.payload == {"v": 7}
    weft_env.run_until_idle()
    assert run(handle.aresult(timeout=1)) == {"got": [{"v": 7}]}
    with pytest.raises(InvalidTransitionError):
        run(client.asignal("ac-2", "go", None))

    failing = run(client.astart("ac-boom", None, workflow_id="ac-3"))
    weft_env.run_until_idle()
    with pytest.raises(WorkflowFailedError):
        run(failing.aresult(timeout=1))
    assert run(failing.aerror())["message"] == "boom"


def test_aresult_follows_continue_as_new(weft_env: Any) -> None:
    handle = run(client.astart("ac-loop", {"n": 0}, workflow_id="ac-11"))
    weft_env.run_until_idle()
    result = run(handle.aresult(timeout=1))
    assert result["final"] == 2
    assert result["run"] != handle.run_id and result["run"] == str(latest("ac-11").pk)
    assert result == handle.result(timeout=1)  # what the sync result says


def test_aresult_times_out() -> None:
    handle = run(client.astart("ac-wait", None, workflow_id="ac-4"))
    with pytest.raises(TimeoutError, match="ac-4"):
        run(handle.aresult(timeout=0.05))


def test_acancel_asuspend_aresume_aretry_apurge(weft_env: Any) -> None:
    run(client.astart("ac-wait", None, workflow_id="ac-5"))
    weft_env.run_until_idle()
    assert run(client.asuspend("ac-5", "maintenance")).status == "suspended"
    assert run(client.aresume("ac-5")).status in ("pending", "running", "parked")
    cancelled = run(client.acancel("ac-5", "no longer wanted", actor="test"))
    assert cancelled.status == "cancelled"
    assert latest("ac-5").status == "cancelled"

    run(client.astart("ac-boom", None, workflow_id="ac-6"))
    weft_env.run_until_idle()
    assert latest("ac-6").status == "failed"
    assert run(client.aretry("ac-6")).status == "pending"
    status = run(client.aownership_status("ac-6"))
    assert status["workflow_id"] == "ac-6" and status["status"] == "pending"
    assert run(client.apurge("ac-5")) >= 1
    with pytest.raises(WorkflowNotFound):
        run(client.aget_handle("ac-5"))


def test_acomplete_and_afail_async_activity(weft_env: Any) -> None:
    api_workflows.TOKENS.clear()
    done = run(client.astart("api-async", "k1", workflow_id="ac-7"))
    weft_env.run_until_idle()
    run(client.acomplete_async_activity(api_workflows.TOKENS[-1], {"paid": True}))
    weft_env.run_until_idle()
    assert run(done.aresult(timeout=1)) == {"result": {"paid": True}}

    failed = run(client.astart("api-async", "k2", workflow_id="ac-8"))
    weft_env.run_until_idle()
    run(client.afail_async_activity(api_workflows.TOKENS[-1], "declined"))
    weft_env.run_until_idle()
    assert run(failed.aresult(timeout=1))["failed"] == "declined"


def test_aforce_release_rotates_the_epoch_as_force_release_does() -> None:
    run(client.astart("ac-wait", None, workflow_id="ac-9"))
    first = client.force_release("ac-9")
    second = run(client.aforce_release("ac-9"))
    assert second == first + 1 == claim_epoch("ac-9")


class _Spy:
    """Records what every async waiter's ``wait`` returned."""

    def __init__(self, monkeypatch: Any) -> None:
        self.opened = 0
        self.returns: list[bool] = []
        real = backends.open_async_done_waiter

        async def open_waiter(using: str, run_id: str) -> Any:
            waiter = await real(using, run_id)
            if waiter is None:
                return None
            self.opened += 1
            spy = self
            inner = waiter

            class Wrapped:
                async def wait(self, timeout: float) -> bool:
                    got = await inner.wait(timeout)
                    spy.returns.append(got)
                    return got

                async def close(self) -> None:
                    await inner.close()

            return Wrapped()

        monkeypatch.setattr(backends, "open_async_done_waiter", open_waiter)


async def _wait_while_ticking(handle: Any, finish: Callable[[], Any]) -> tuple[Any, int]:
    """``aresult`` while a ticker runs on the same loop and a thread finishes the run."""
    ticks = 0
    stop = asyncio.Event()

    async def ticker() -> None:
        nonlocal ticks
        while not stop.is_set():
            ticks += 1
            await asyncio.sleep(0.005)

    tick_task = asyncio.create_task(ticker())
    waiting = asyncio.create_task(handle.aresult(timeout=20))
    await asyncio.sleep(0.05)  # aresult is now waiting (subscribed, row read)
    assert not waiting.done()
    before = ticks
    thread = threading.Thread(target=finish)
    thread.start()
    result = await waiting
    stop.set()
    await tick_task
    await asyncio.to_thread(thread.join)
    return result, ticks - before


def test_aresult_waits_without_blocking_the_loop(weft_env: Any, monkeypatch: Any) -> None:
    spy = _Spy(monkeypatch)
    handle = run(client.astart("ac-wait", None, workflow_id="ac-10"))
    weft_env.run_until_idle()  # parked on the signal

    def finish() -> None:
        try:
            client.signal("ac-10", "go", "now")
            weft_env.run_until_idle()
        finally:
            connections.close_all()

    result, ticks = run(_wait_while_ticking(handle, finish))
    assert result == {"got": ["now"]}
    assert ticks > 0  # the loop ran other coroutines while aresult waited
    if connection.vendor == "postgresql":
        # The wait ended on the weft_done announcement (a True), not a re-read only.
        assert spy.opened >= 1 and True in spy.returns, spy.returns
    else:
        assert spy.opened == 0  # no async LISTEN there: aresult polled with asyncio.sleep


def test_a_failing_async_listen_falls_back_to_polling(weft_env: Any, monkeypatch: Any) -> None:
    from weft_django.transports.notify import aio as anotify

    async def refused(using: str) -> Any:
        raise OSError("connection refused")

    monkeypatch.setattr(anotify, "_hub", refused)
    assert run(anotify.open_done_waiter("default", "some-run")) is None
    handle = run(client.astart("ac-echo", "p", workflow_id="ac-12"))
    weft_env.run_until_idle()
    assert run(handle.aresult(timeout=5)) == {"echo": "p"}
