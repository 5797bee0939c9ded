"""``WorkflowHandle``: a started run, what it ended with, and the actions on it.

Invariant of every wait (``result`` and ``aresult`` run the same ``_waiting``
plan; only the I/O differs): the caller subscribes to the run's finish
announcement *before* it reads the row, so a finish committed after that
read is announced to the subscription and one committed before it is in the
row; it then waits on the announcement, re-reading at least every
``REREAD_S`` (a wake is a hint, the row is the truth). Without a backend
that announces finishes it polls, 10 ms doubling to 1 s. A run that
continued as new is followed to the run that carries on, and the
subscription moves with it.

The action methods delegate to the module functions and, like them, act on
the workflow id's newest run.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Generator
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Generic, TypeVar

from weft_django.client import actions, updates
from weft_django.client.aio import asyncify
from weft_django.conf import get_settings
from weft_django.engine.operations import latest_run
from weft_django.engine.wakes import backends
from weft_django.engine.workflow.payload_types import Rebuild
from weft_django.errors import WorkflowFailedError, WorkflowNotFound
from weft_django.models import TERMINAL_STATUSES, WorkflowRun

#: The longest a wait blocks on an announcement before re-reading the row.
REREAD_S = 1.0


@dataclass(frozen=True)
class _Read:
    """Read the row (following ``continue_as_new``)."""


@dataclass(frozen=True)
class _Open:
    """Subscribe to ``run_id``'s finish; the waiter, or ``None`` (poll)."""

    run_id: str


@dataclass(frozen=True)
class _Wait:
    waiter: Any
    seconds: float


@dataclass(frozen=True)
class _Sleep:
    seconds: float


@dataclass(frozen=True)
class _Close:
    waiter: Any


_Step = _Read | _Open | _Wait | _Sleep | _Close


def _waiting(workflow_id: str, run_id: str, timeout: float | None) -> Generator[_Step, Any, Any]:
    """The wait as a plan of steps: the driver does each step and sends back its
    value (the run for ``_Read``, the waiter for ``_Open``); returns the result."""
    deadline = None if timeout is None else time.monotonic() + timeout
    delay = 0.01
    waiter = yield _Open(run_id)  # before the first read
    watched = run_id
    try:
        while True:
            run: WorkflowRun = yield _Read()
            if run.status == "completed":
                return run.result
            if run.status in TERMINAL_STATUSES:
                raise WorkflowFailedError(workflow_id, run.status, run.error)
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                raise TimeoutError(
                    f"workflow {workflow_id!r} is still {run.status} after {timeout} s"
                )
            if watched != str(run.pk):  # continued as new: watch the run that carries on
                if waiter is not None:
                    yield _Close(waiter)
                waiter, watched = (yield _Open(str(run.pk))), str(run.pk)
                if waiter is not None:
                    continue  # subscribed: read the row once more, then wait
            if waiter is not None:
                yield _Wait(waiter, REREAD_S if remaining is None else min(REREAD_S, remaining))
            else:
                yield _Sleep(delay if remaining is None else min(delay, remaining))
                delay = min(delay * 2, 1.0)
    finally:
        if waiter is not None:
            yield _Close(waiter)


def _continued_as(run: WorkflowRun) -> Any:
    """The run id ``run`` continued as, or ``None``."""
    if run.status == "completed" and isinstance(run.result, dict):
        return run.result.get("continued_as_new")
    return None


R = TypeVar("R", covariant=True)


@dataclass(frozen=True)
class WorkflowHandle(Generic[R]):
    """A started run: ``workflow_id``, ``run_id``, what it ended with, and the
    actions on its workflow; every method has its ``a…`` twin.

    ``WorkflowHandle[R]`` (``client.start`` given the workflow function):
    ``result()`` / ``aresult()`` return the result rebuilt as ``R``, the
    workflow's declared return type; a handle made from a name is
    ``WorkflowHandle[Any]`` and returns the stored JSON."""

    workflow_id: str
    run_id: str
    #: How the stored result is rebuilt as ``R`` (``None``: handed back as stored).
    rebuild: Rebuild | None = field(default=None, compare=False, repr=False)

    def _typed(self, value: Any) -> R:
        return value if self.rebuild is None else self.rebuild(value, "result")  # type: ignore[no-any-return]

    # -- reading the run -----------------------------------------------------
    def _run(self, run_id: str | None = None) -> WorkflowRun:
        manager = WorkflowRun.objects.using(get_settings().database)
        run = manager.filter(pk=run_id or self.run_id).first()
        if run is None:
            raise WorkflowNotFound(self.workflow_id)
        return run

    async def _arun(self, run_id: str | None = None) -> WorkflowRun:
        manager = WorkflowRun.objects.using(get_settings().database)
        run = await manager.filter(pk=run_id or self.run_id).afirst()
        if run is None:
            raise WorkflowNotFound(self.workflow_id)
        return run

    def status(self) -> str:
        return self._run().status

    async def astatus(self) -> str:
        return (await self._arun()).status

    def error(self) -> Any:
        return self._run().error

    async def aerror(self) -> Any:
        return (await self._arun()).error

    def _follow(self, run: WorkflowRun) -> WorkflowRun:
        """Follow ``continue_as_new`` to the run that carries on."""
        manager = WorkflowRun.objects.using(get_settings().database)
        while (continued := _continued_as(run)) is not None:
            nxt = manager.filter(pk=continued).first()
            if nxt is None:
                break
            run = nxt
        return run

    async def _afollow(self, run: WorkflowRun) -> WorkflowRun:
        manager = WorkflowRun.objects.using(get_settings().database)
        while (continued := _continued_as(run)) is not None:
            nxt = await manager.filter(pk=continued).afirst()
            if nxt is None:
                break
            run = nxt
        return run

    # -- waiting for the end -------------------------------------------------
    def result(self, timeout: float | None = 30.0) -> R:
        """The result; ``WorkflowFailedError`` if it ended otherwise; ``TimeoutError``."""
        db = get_settings().database
        plan = _waiting(self.workflow_id, self.run_id, timeout)
        sent: Any = None
        failed: BaseException | None = None
        while True:
            try:
                step = plan.send(sent) if failed is None else plan.throw(failed)
            except StopIteration as done:
                return self._typed(done.value)
            sent, failed = None, None
            try:
                if isinstance(step, _Read):
                    sent = self._follow(self._run())
                elif isinstance(step, _Open):
                    sent = backends.done_waiter(db, step.run_id)
                elif isinstance(step, _Wait):
                    step.waiter.wait(step.seconds)
                elif isinstance(step, _Sleep):
                    time.sleep(step.seconds)
                else:
                    step.waiter.close()
            except BaseException as exc:  # into the plan: it closes its waiter
                failed = exc

    async def aresult(self, timeout: float | None = 30.0) -> R:
        """``result()`` without blocking the loop (an async done waiter)."""
        db = get_settings().database
        plan = _waiting(self.workflow_id, self.run_id, timeout)
        sent: Any = None
        failed: BaseException | None = None
        while True:
            try:
                step = plan.send(sent) if failed is None else plan.throw(failed)
            except StopIteration as done:
                return self._typed(done.value)
            sent, failed = None, None
            try:
                if isinstance(step, _Read):
                    sent = await self._afollow(await self._arun())
                elif isinstance(step, _Open):
                    sent = await backends.open_async_done_waiter(db, step.run_id)
                elif isinstance(step, _Wait):
                    await step.waiter.wait(step.seconds)
                elif isinstance(step, _Sleep):
                    await asyncio.sleep(step.seconds)
                else:
                    await step.waiter.close()
            except BaseException as exc:  # into the plan: it closes its waiter
                failed = exc

    # -- actions on the workflow (its newest run) ----------------------------
    def signal(self, name: str, payload: Any = None, *, idempotency_key: str | None = None) -> Any:
        """``client.signal(workflow_id, name, payload, idempotency_key=...)``."""
        return actions.signal(self.workflow_id, name, payload, idempotency_key=idempotency_key)

    asignal = asyncify(signal)

    def cancel(
        self, reason: str = "", *, grace: timedelta | float | None = None, force: bool = False
    ) -> Any:
        """``client.cancel(workflow_id, reason, grace=..., force=...)``."""
        return actions.cancel(self.workflow_id, reason, grace=grace, force=force)

    acancel = asyncify(cancel)

    def query(self, name: str, *args: Any) -> Any:
        """``client.query(workflow_id, name, *args)``."""
        return actions.query(self.workflow_id, name, *args)

    aquery = asyncify(query)

    def update(
        self, name: str, *args: Any, update_id: str | None = None, timeout: float = 30
    ) -> Any:
        """``client.update(workflow_id, name, *args, ...)``: the handler's answer."""
        return updates.update(self.workflow_id, name, *args, update_id=update_id, timeout=timeout)

    aupdate = asyncify(update)

    def ownership(self) -> dict[str, Any]:
        """``client.ownership_status(workflow_id)``: the claim's epoch and holder."""
        return actions.ownership_status(self.workflow_id)

    aownership = asyncify(ownership)


def get_handle(workflow_id: str) -> WorkflowHandle[Any]:
    """The handle of ``workflow_id``'s newest run (``WorkflowNotFound`` if none)."""
    run = latest_run(workflow_id)
    return WorkflowHandle(workflow_id, str(run.pk))


aget_handle = asyncify(get_handle)

__all__ = ["REREAD_S", "WorkflowHandle", "aget_handle", "get_handle"]
