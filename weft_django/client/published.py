"""``client.get_event`` / ``get_events`` / ``read_stream`` and their async twins.

Invariant (the same as ``WorkflowHandle.result``): a waiter subscribes to
the run's announcements *before* it reads the rows, so a value committed
after the read is announced to the subscription and one committed before it
is in the read -- no value is missed, and no wait outlasts a set by more
than one announcement. On PostgreSQL the announcement is the ``NOTIFY
weft_done`` the publishing batch sends on commit (``engine.turn.publish``);
elsewhere the reader polls (10 ms doubling to ``POLL_MAX_S``). Either way
it re-reads at least every ``REREAD_S``: a wake is a hint, the row is the
truth.

A run's end ends every wait: ``get_event`` raises ``WorkflowFinishedError``
when the run ended without setting the key, and a stream ends when it is
closed or the run ended (after one last read: a value committed between the
reader's row read and its status read is not lost). Events and streams
belong to the run that published them: these read the workflow's newest
run (``client.start(..., on_conflict="start-new")`` or continue-as-new
starts afresh).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

from weft_django.client.aio import asyncify
from weft_django.conf import get_settings
from weft_django.engine.operations import latest_run
from weft_django.engine.wakes import backends
from weft_django.engine.workflow.publish import check_key
from weft_django.errors import WorkflowFinishedError, WorkflowNotFound, WorkflowTimeoutError
from weft_django.models import TERMINAL_STATUSES, StreamEntry, WorkflowEvent, WorkflowRun

REREAD_S = 1.0
POLL_MIN_S = 0.01
POLL_MAX_S = 0.25
#: Stream rows read per query.
STREAM_BATCH = 200


def _deadline(timeout: float | None) -> float | None:
    if timeout is not None and (isinstance(timeout, bool) or timeout < 0):
        raise ValueError(f"timeout must be None or a number of seconds >= 0, got {timeout!r}")
    return None if timeout is None else time.monotonic() + float(timeout)


def _offset(offset: Any) -> int:
    if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
        raise ValueError(f"offset must be an integer >= 0, got {offset!r}")
    return offset


def _timeout_left(deadline: float | None) -> float | None:
    return None if deadline is None else deadline - time.monotonic()


def _status(db: str, workflow_id: str, run_pk: Any) -> str:
    status = WorkflowRun.objects.using(db).filter(pk=run_pk).values_list("status", flat=True)
    found = status.first()
    if found is None:
        raise WorkflowNotFound(workflow_id)  # purged under the wait
    return str(found)


def _event(db: str, run_pk: Any, key: str) -> tuple[bool, Any]:
    rows = WorkflowEvent.objects.using(db).filter(run_id=run_pk, key=key).values_list("value")
    row = rows.first()
    return (False, None) if row is None else (True, row[0])


def get_events(workflow_id: str) -> dict[str, Any]:
    """Every event the workflow's newest run set, by key (last value of each)."""
    db = get_settings().database
    run = latest_run(workflow_id, db)
    rows = WorkflowEvent.objects.using(db).filter(run_id=run.pk).order_by("key")
    return dict(rows.values_list("key", "value"))


aget_events = asyncify(get_events)


def get_event(workflow_id: str, key: str, timeout: float | None = None) -> Any:
    """The value of event ``key``, waiting until it is set.

    ``WorkflowTimeoutError`` after ``timeout`` seconds (``None``: no limit);
    ``WorkflowFinishedError`` when the run ended without setting it;
    ``WorkflowNotFound`` for an unknown workflow.
    """
    check_key("event key", key)
    deadline = _deadline(timeout)
    db = get_settings().database
    run = latest_run(workflow_id, db)
    waiter = backends.done_waiter(db, str(run.pk))  # before the first read
    delay = POLL_MIN_S
    try:
        while True:
            found, value = _event(db, run.pk, key)
            if found:
                return value
            status = _status(db, workflow_id, run.pk)
            if status in TERMINAL_STATUSES:
                found, value = _event(db, run.pk, key)  # set by the run's last commit
                if found:
                    return value
                raise WorkflowFinishedError(workflow_id, status, f"setting event {key!r}")
            remaining = _timeout_left(deadline)
            if remaining is not None and remaining <= 0:
                raise WorkflowTimeoutError(workflow_id, f"event {key!r}")
            if waiter is not None:
                waiter.wait(REREAD_S if remaining is None else min(REREAD_S, remaining))
            else:
                time.sleep(delay if remaining is None else min(delay, remaining))
                delay = min(delay * 2, POLL_MAX_S)
    finally:
        if waiter is not None:
            waiter.close()


def _rows(db: str, run_pk: Any, key: str, start: int) -> Any:
    return (
        StreamEntry.objects.using(db)
        .filter(run_id=run_pk, key=key, offset__gte=start)
        .order_by("offset")
        .values_list("offset", "value", "closed")[:STREAM_BATCH]
    )


def stream_entries(
    workflow_id: str, key: str, offset: int = 0, *, ticks: bool = False
) -> Iterator[Any]:
    """``(offset, value)`` of stream ``key`` from ``offset`` on, as they arrive,
    until the stream is closed or the run ended (the SSE view's source).
    ``ticks``: also ``None`` after each quiet wait (at most ``REREAD_S``), so a
    caller can show it is alive. ``WorkflowNotFound`` at the call."""
    check_key("stream key", key)
    start = _offset(offset)
    db = get_settings().database
    run = latest_run(workflow_id, db)
    return _follow(db, workflow_id, run.pk, key, start, ticks)


def _follow(
    db: str, workflow_id: str, run_pk: Any, key: str, start: int, ticks: bool
) -> Iterator[Any]:
    waiter = backends.done_waiter(db, str(run_pk))  # before the first read
    delay, ended, quiet_since = POLL_MIN_S, False, time.monotonic()
    try:
        while True:
            rows = list(_rows(db, run_pk, key, start))
            for offset, value, closed in rows:
                if closed:
                    return
                yield offset, value
                start, quiet_since = offset + 1, time.monotonic()
            if rows:
                delay = POLL_MIN_S
                continue
            if ended:
                return
            if _status(db, workflow_id, run_pk) in TERMINAL_STATUSES:
                ended = True  # one more read: a write committed before the end
                continue
            if waiter is not None:
                waiter.wait(REREAD_S)
            else:
                time.sleep(delay)
                delay = min(delay * 2, POLL_MAX_S)
            if ticks and time.monotonic() - quiet_since >= REREAD_S:
                quiet_since = time.monotonic()
                yield None
    finally:
        if waiter is not None:
            waiter.close()


def read_stream(workflow_id: str, key: str, offset: int = 0) -> Iterator[Any]:
    """The values of stream ``key`` from ``offset`` on, as they arrive, until the
    stream is closed or the run ended. ``WorkflowNotFound`` at the call."""
    entries = stream_entries(workflow_id, key, offset)
    return (value for _at, value in entries)


# -- async twins ---------------------------------------------------------------
async def _astatus(db: str, workflow_id: str, run_pk: Any) -> str:
    found = (
        await WorkflowRun.objects.using(db)
        .filter(pk=run_pk)
        .values_list("status", flat=True)
        .afirst()
    )
    if found is None:
        raise WorkflowNotFound(workflow_id)
    return str(found)


async def _aevent(db: str, run_pk: Any, key: str) -> tuple[bool, Any]:
    rows = WorkflowEvent.objects.using(db).filter(run_id=run_pk, key=key).values_list("value")
    row = await rows.afirst()
    return (False, None) if row is None else (True, row[0])


async def _alatest(workflow_id: str, db: str) -> WorkflowRun:
    run = (
        await WorkflowRun.objects.using(db)
        .filter(workflow_id=workflow_id)
        .order_by("-created_at", "-pk")
        .afirst()
    )
    if run is None:
        raise WorkflowNotFound(workflow_id)
    return run


async def aget_event(workflow_id: str, key: str, timeout: float | None = None) -> Any:
    """``get_event`` without blocking the loop (an async done waiter)."""
    check_key("event key", key)
    deadline = _deadline(timeout)
    db = get_settings().database
    run = await _alatest(workflow_id, db)
    waiter = await backends.open_async_done_waiter(db, str(run.pk))
    delay = POLL_MIN_S
    try:
        while True:
            found, value = await _aevent(db, run.pk, key)
            if found:
                return value
            status = await _astatus(db, workflow_id, run.pk)
            if status in TERMINAL_STATUSES:
                found, value = await _aevent(db, run.pk, key)
                if found:
                    return value
                raise WorkflowFinishedError(workflow_id, status, f"setting event {key!r}")
            remaining = _timeout_left(deadline)
            if remaining is not None and remaining <= 0:
                raise WorkflowTimeoutError(workflow_id, f"event {key!r}")
            if waiter is not None:
                await waiter.wait(REREAD_S if remaining is None else min(REREAD_S, remaining))
            else:
                await asyncio.sleep(delay if remaining is None else min(delay, remaining))
                delay = min(delay * 2, POLL_MAX_S)
    finally:
        if waiter is not None:
            await waiter.close()


async def astream_entries(
    workflow_id: str, key: str, offset: int = 0, *, ticks: bool = False
) -> AsyncIterator[Any]:
    """``stream_entries`` as an async iterator (the ASGI SSE view's source)."""
    check_key("stream key", key)
    start = _offset(offset)
    db = get_settings().database
    run = await _alatest(workflow_id, db)
    waiter = await backends.open_async_done_waiter(db, str(run.pk))
    delay, ended, quiet_since = POLL_MIN_S, False, time.monotonic()
    try:
        while True:
            rows = [row async for row in _rows(db, run.pk, key, start)]
            for row_offset, value, closed in rows:
                if closed:
                    return
                yield row_offset, value
                start, quiet_since = row_offset + 1, time.monotonic()
            if rows:
                delay = POLL_MIN_S
                continue
            if ended:
                return
            if await _astatus(db, workflow_id, run.pk) in TERMINAL_STATUSES:
                ended = True
                continue
            if waiter is not None:
                await waiter.wait(REREAD_S)
            else:
                await asyncio.sleep(delay)
                delay = min(delay * 2, POLL_MAX_S)
            if ticks and time.monotonic() - quiet_since >= REREAD_S:
                quiet_since = time.monotonic()
                yield None
    finally:
        if waiter is not None:
            await waiter.close()


async def aread_stream(workflow_id: str, key: str, offset: int = 0) -> AsyncIterator[Any]:
    """``read_stream`` as an async iterator: ``async for value in aread_stream(...)``."""
    async for _at, value in astream_entries(workflow_id, key, offset):
        yield value


__all__ = [
    "POLL_MAX_S",
    "REREAD_S",
    "aget_event",
    "aget_events",
    "aread_stream",
    "astream_entries",
    "get_event",
    "get_events",
    "read_stream",
    "stream_entries",
]
