"""``client``: start, signal, cancel, query ... from any Django process (SPEC §2).

Every call writes through the conditional batch inside the caller's
transaction when there is one (a view under ``ATOMIC_REQUESTS`` gets an
outbox for free); wakes are sent on commit. ``client.start`` never claims:
it writes the run as ``pending`` and an engine folds its acquire into the
pickup (ADR 0002: *intentionally external*).
"""

from __future__ import annotations

import dataclasses
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from weft_django.client.aio import AsyncHandleMethods, asyncify
from weft_django.client.published import aget_event as aget_event
from weft_django.client.published import aread_stream as aread_stream
from weft_django.client.published import get_event as get_event
from weft_django.client.published import get_events as get_events
from weft_django.client.published import read_stream as read_stream
from weft_django.client.updates import update as update
from weft_django.conf import get_settings
from weft_django.db.postgresql import start as start_statement
from weft_django.engine import operations, tracing
from weft_django.engine.journal import load_events
from weft_django.engine.operations import latest_run
from weft_django.engine.operations.bulk import DEFAULT_CHUNK_SIZE, Progress, run_many
from weft_django.engine.operations.bulk import BulkResult as BulkResult
from weft_django.engine.operations.signal_with_start import signal_with_start as _signal_with_start
from weft_django.engine.queues import flow as queues
from weft_django.engine.replay.machine import Replay
from weft_django.engine.runs.filters import AttributeRange as AttributeRange
from weft_django.engine.runs.filters import RunFilter as RunFilter
from weft_django.engine.runs.listing import RunSummary as RunSummary
from weft_django.engine.runs.listing import count_runs as count_runs
from weft_django.engine.runs.listing import list_runs as list_runs
from weft_django.engine.wakes import DoneWaiter, Wake, announce, backends
from weft_django.engine.workflow.definitions import get_workflow
from weft_django.engine.workflow.payload import normalize
from weft_django.errors import (
    IdempotencyConflictError,
    InvalidArgumentError,
    InvalidTransitionError,
    UnknownQuery,
    WorkflowAlreadyRunning,
    WorkflowFailedError,
    WorkflowNotFound,
)
from weft_django.kernel.clock import now_ms
from weft_django.kernel.durations import to_ms
from weft_django.kernel.ids import (
    WORKFLOW_ID_RE as WORKFLOW_ID_RE,  # moved to ids; kept for imports
)
from weft_django.kernel.ids import (
    check_lookup_id,
    check_name,
    is_storable_text,
    validate_workflow_id,
)
from weft_django.models import TERMINAL_STATUSES, WorkflowClaim, WorkflowRun
from weft_django.ownership import WORKFLOW_CLAIM_TAKEOVER_GRACE_MULTIPLIER
from weft_django.ownership.batch import Insert, UniqueAbsence, conditional_batch
from weft_django.ownership.codec import MAX_TIMESTAMP_EXCLUSIVE, decode_holder_row

signal = operations.signal
cancel = operations.cancel
suspend = operations.suspend
resume = operations.resume
retry = operations.retry
force_release = operations.force_release


@dataclass(frozen=True)
class WorkflowHandle(AsyncHandleMethods):
    """A started run: ``workflow_id``, ``run_id`` and ways to look at it
    (``aresult``, ``astatus``, ``aerror``: ``engine.aclient``)."""

    workflow_id: str
    run_id: str

    def _run(self) -> WorkflowRun:
        run = WorkflowRun.objects.using(get_settings().database).filter(pk=self.run_id).first()
        if run is None:
            raise WorkflowNotFound(self.workflow_id)
        return run

    def status(self) -> str:
        return self._run().status

    def error(self) -> Any:
        return self._run().error

    def result(self, timeout: float | None = 30.0) -> Any:
        """The result; ``WorkflowFailedError`` if it ended otherwise; ``TimeoutError``.

        With a backend that announces finishes (NOTIFY on PostgreSQL) the
        caller subscribes *before* it reads the row -- a finish committed
        after that read is announced to the subscription, one committed
        before it is in the row -- and then blocks until the announcement
        (re-reading at least every second: a wake is a hint, the row is the
        truth). Elsewhere it polls, 10 ms doubling to 1 s.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        delay = 0.01
        db = get_settings().database
        waiter: DoneWaiter | None = backends.done_waiter(db, self.run_id)
        watched = self.run_id
        try:
            while True:
                run = self._follow(self._run())
                if run.status == "completed":
                    return run.result
                if run.status in TERMINAL_STATUSES:
                    raise WorkflowFailedError(self.workflow_id, run.status, run.error)
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    raise TimeoutError(
                        f"workflow {self.workflow_id!r} is still {run.status} after {timeout} s"
                    )
                if watched != str(run.pk):  # first time, or continued as new
                    if waiter is not None:
                        waiter.close()
                    waiter, watched = backends.done_waiter(db, str(run.pk)), str(run.pk)
                    if waiter is not None:
                        continue  # subscribed: read the row once more, then block
                if waiter is not None:
                    waiter.wait(1.0 if remaining is None else min(1.0, remaining))
                else:
                    time.sleep(delay if remaining is None else min(delay, remaining))
                    delay = min(delay * 2, 1.0)
        finally:
            if waiter is not None:
                waiter.close()

    def _follow(self, run: WorkflowRun) -> WorkflowRun:
        """Follow ``continue_as_new`` to the run that carries on."""
        while (
            run.status == "completed"
            and isinstance(run.result, dict)
            and "continued_as_new" in run.result
        ):
            nxt = (
                WorkflowRun.objects.using(get_settings().database)
                .filter(pk=run.result["continued_as_new"])
                .first()
            )
            if nxt is None:
                break
            run = nxt
        return run


def _ms_from_now(value: timedelta | float | int | None, what: str) -> int | None:
    if value is None:
        return None
    try:
        at = now_ms() + to_ms(value, what)
    except (TypeError, ValueError, OverflowError) as exc:
        raise InvalidArgumentError(what, str(exc)) from None
    if at >= MAX_TIMESTAMP_EXCLUSIVE:  # the store keeps instants below 2**53 ms
        raise InvalidArgumentError(what, f"{what} is too far in the future, got {value!r:.100}")
    return at


def start(
    name: str,
    input: Any = None,
    *,
    workflow_id: str | None = None,
    idempotency_key: str | None = None,
    start_after: timedelta | float | None = None,
    start_at: datetime | None = None,
    execution_timeout: timedelta | float | None = None,
    on_conflict: Literal["error", "start-new"] = "error",
    queue: str | None = None,
    priority: int = 0,
    concurrency_key: str | None = None,
) -> WorkflowHandle:
    """Write a ``pending`` run; an engine picks it up. Nothing is claimed here.

    ``queue`` (default: the workflow's ``@workflow(queue=...)``),
    ``priority`` and ``concurrency_key``: flow control (``engine.queues``).
    Traced as ``weft.start <name>`` (``engine.tracing``): its context is the
    run's ``trace_context``, written by the insert itself."""
    with tracing.start_span(name, source="client", workflow_id=workflow_id) as span:
        handle = _start(
            name,
            input,
            workflow_id=workflow_id,
            idempotency_key=idempotency_key,
            start_after=start_after,
            start_at=start_at,
            execution_timeout=execution_timeout,
            on_conflict=on_conflict,
            queue=queue,
            priority=priority,
            concurrency_key=concurrency_key,
        )
        tracing.annotate(span, workflow_id=handle.workflow_id, run_id=handle.run_id)
        return handle


def _start(
    name: str,
    input: Any,
    *,
    workflow_id: str | None,
    idempotency_key: str | None,
    start_after: timedelta | float | None,
    start_at: datetime | None,
    execution_timeout: timedelta | float | None,
    on_conflict: Literal["error", "start-new"],
    queue: str | None,
    priority: int,
    concurrency_key: str | None,
) -> WorkflowHandle:
    if not isinstance(name, str):
        raise InvalidArgumentError("name", f"workflow name must be a string, got {name!r:.100}")
    definition = get_workflow(name)  # UnknownWorkflowType before anything is written
    queue_fields = queues.run_fields(
        queue if queue is not None else definition.queue, priority, concurrency_key
    )
    stored_input = normalize("workflow input", input)
    if workflow_id is None:
        workflow_id = str(uuid.uuid4())
    workflow_id = validate_workflow_id(workflow_id)
    if idempotency_key is not None and (
        not isinstance(idempotency_key, str)
        or not 0 < len(idempotency_key) <= 255
        or not is_storable_text(idempotency_key)
    ):
        raise InvalidArgumentError(
            "idempotency_key",
            "idempotency_key must be a string of 1 to 255 characters (no NUL, no lone "
            f"surrogate), got {idempotency_key!r:.300}",
        )
    if on_conflict not in ("error", "start-new"):
        raise InvalidArgumentError(
            "on_conflict", f"on_conflict must be 'error' or 'start-new', got {on_conflict!r:.100}"
        )
    if start_at is not None and start_after is not None:
        raise InvalidArgumentError("start_at", "give start_at or start_after, not both")
    begin_at = _ms_from_now(start_after, "start_after")
    if start_at is not None:
        if not isinstance(start_at, datetime) or start_at.tzinfo is None:
            raise InvalidArgumentError(
                "start_at", f"start_at must be an aware datetime, got {start_at!r:.100}"
            )
        begin_at = int(start_at.timestamp() * 1000)
    deadline = _ms_from_now(execution_timeout, "execution_timeout")
    if deadline is not None and begin_at is not None:
        deadline += max(0, begin_at - now_ms())

    db = get_settings().database
    if idempotency_key is None:
        started = _start_in_one_statement(
            workflow_id, name, stored_input, begin_at, deadline, on_conflict, db, queue_fields
        )
        if started is not None:
            return started
    # No transaction of its own (the caller's, when there is one): the one
    # write is the batch's, and what keeps a concurrent start out is the
    # unique constraint its Insert fails on (one live run per workflow id, one
    # run per idempotency key), not a transaction around these reads -- under
    # READ COMMITTED one would not have kept it out either. Outside a
    # transaction the batch's own is just BEGIN, INSERT, COMMIT.
    if idempotency_key is not None:
        existing = WorkflowRun.objects.using(db).filter(idempotency_key=idempotency_key).first()
        if existing is not None:
            return _existing_for_key(existing, idempotency_key, name)
    previous = WorkflowRun.objects.using(db).latest_for(workflow_id)
    if previous is not None:
        if previous.status not in TERMINAL_STATUSES:
            raise WorkflowAlreadyRunning(workflow_id, str(previous.pk))
        if on_conflict != "start-new":
            raise InvalidTransitionError(workflow_id, previous.status, "start")
    run = WorkflowRun(
        workflow_id=workflow_id,
        name=name,
        status="pending",
        input=stored_input,
        idempotency_key=idempotency_key,
        start_at=begin_at,
        deadline_at=deadline,
        trace_context=tracing.carrier(),
        **queue_fields,
    )
    live = UniqueAbsence("one live run per workflow id")
    result = conditional_batch([live], [Insert(run, live)], using=db)
    if not result.committed:
        if idempotency_key is not None:
            existing = WorkflowRun.objects.using(db).filter(idempotency_key=idempotency_key).first()
            if existing is not None:
                return _existing_for_key(existing, idempotency_key, name)
        raise WorkflowAlreadyRunning(workflow_id)
    # On the caller's commit, or now (the batch committed its own transaction).
    announce(Wake("start", str(run.pk), db, workflow_id, begin_at))
    return WorkflowHandle(workflow_id, str(run.pk))


def _start_in_one_statement(
    workflow_id: str,
    name: str,
    stored_input: Any,
    begin_at: int | None,
    deadline: int | None,
    on_conflict: str,
    db: str,
    queue_fields: dict[str, Any],
) -> WorkflowHandle | None:
    """The common start as ONE statement (``engine.start_statement``), its
    pickup wake in it when a backend can send it there; ``None``: the slow
    path decides (something stood in the way, or it does not apply)."""
    run = WorkflowRun(
        workflow_id=workflow_id,
        name=name,
        status="pending",
        input=stored_input,
        start_at=begin_at,
        deadline_at=deadline,
        trace_context=tracing.carrier(),
        **queue_fields,
    )
    if not start_statement.applies(run, db):
        return None
    wake = Wake("start", str(run.pk), db, workflow_id, begin_at)
    riding = backends.in_statement(wake)
    inserted = start_statement.insert_start(
        run,
        after_finished=on_conflict == "start-new",
        notify=riding[1] if riding is not None else None,
        using=db,
    )
    if not inserted:
        return None
    if riding is not None:
        wake = dataclasses.replace(wake, delivered_by=frozenset({riding[0]}))
    announce(wake)  # the other backends, on the caller's commit or now
    return WorkflowHandle(workflow_id, str(run.pk))


def _existing_for_key(existing: WorkflowRun, key: str, name: str) -> WorkflowHandle:
    if existing.name != name:
        raise IdempotencyConflictError(key, existing.name, name)
    return WorkflowHandle(existing.workflow_id, str(existing.pk))


def get_handle(workflow_id: str) -> WorkflowHandle:
    run = latest_run(workflow_id)
    return WorkflowHandle(workflow_id, str(run.pk))


def complete_async_activity(token: str, result: Any = None) -> None:
    operations.settle_async(token, result=normalize("async activity result", result))


def fail_async_activity(token: str, error: Any = "failed") -> None:
    operations.settle_async(token, error=_async_error_record(error))


def complete_async_activity_by_hash(token_hash: str, result: Any = None) -> None:
    """``complete_async_activity`` naming the row by its stored SHA-256 (the admin's
    staff action: the raw token is never stored)."""
    operations.settle_async_hash(token_hash, result=normalize("async activity result", result))


def fail_async_activity_by_hash(token_hash: str, error: Any = "failed") -> None:
    """``fail_async_activity`` naming the row by its stored SHA-256."""
    operations.settle_async_hash(token_hash, error=_async_error_record(error))


def _async_error_record(error: Any) -> dict[str, Any]:
    """The ``ActivityError`` record a failed async activity resumes its workflow with."""
    if isinstance(error, BaseException):
        record: dict[str, Any] = {"type": type(error).__name__, "message": str(error)}
    elif isinstance(error, dict):
        record = {
            "type": str(error.get("type") or "AsyncActivityFailed"),
            "message": str(error.get("message", "failed")),
        }
        if "details" in error:
            record["details"] = error["details"]
    else:
        record = {"type": "AsyncActivityFailed", "message": str(error)}
    return normalize("async activity error", record)  # type: ignore[no-any-return]


def query(workflow_id: str, name: str, *args: Any) -> Any:
    """Replay the journal read-only in this process and call the ``on_query`` handler."""
    run = latest_run(workflow_id)
    definition = get_workflow(run.name)
    replay = Replay(
        definition,
        workflow_id=workflow_id,
        run_id=str(run.pk),
        input=run.input,
        events=load_events(run.pk, get_settings().database),
        clock_ms=now_ms,
        record=False,
    )
    outcome = replay.advance()
    handler = replay.ctx.query_handlers.get(check_name("query", name))
    if handler is None:
        raise UnknownQuery(workflow_id, name, sorted(replay.ctx.query_handlers))
    del outcome  # Frontier or terminal: the handler sees the state either way
    return normalize(f"query {name!r} result", handler(*args))


def purge(workflow_id: str | None = None, *, older_than: timedelta | None = None) -> int:
    if (workflow_id is None) == (older_than is None):
        raise InvalidArgumentError("older_than", "give a workflow_id or older_than")
    if workflow_id is not None:
        return operations.purge(check_lookup_id(workflow_id))
    if not isinstance(older_than, timedelta) or not timedelta(0) <= older_than <= datetime.now(
        UTC
    ) - datetime(1, 1, 2, tzinfo=UTC):
        raise InvalidArgumentError(
            "older_than",
            "older_than must be a non-negative timedelta reaching no further back than the "
            f"year 1, got {older_than!r:.100}",
        )
    return operations.purge_older_than(older_than)


def ownership_status(workflow_id: str) -> dict[str, Any]:
    """The owner of ``workflow_id`` as the API's ``ownership/`` endpoint serves it."""
    settings = get_settings()
    db = settings.database
    run = WorkflowRun.objects.using(db).latest_for(check_lookup_id(workflow_id))
    claim = WorkflowClaim.objects.using(db).filter(pk=workflow_id).first()
    holder = None
    expired = False
    if claim is not None:
        record = decode_holder_row(claim.engine_id, claim.epoch, claim.expires_at, claim.claimed_at)
        if record is not None:
            holder = {
                "engine_id": record.engine_id,
                "epoch": record.epoch,
                "expires_at": record.expires_at,
                "claimed_at": record.claimed_at,
            }
            grace = WORKFLOW_CLAIM_TAKEOVER_GRACE_MULTIPLIER * settings.claim_renew_interval_ms
            expired = record.expires_at + grace < now_ms()
        elif claim.engine_id is not None or claim.expires_at is not None:
            expired = True
    if run is None and claim is None:
        raise WorkflowNotFound(workflow_id)
    return {
        "workflow_id": workflow_id,
        "status": run.status if run is not None else None,
        "epoch": claim.epoch if claim is not None else 0,
        "holder": holder,
        "expired": expired,
    }


__all__ = [
    "WorkflowHandle",
    "cancel",
    "complete_async_activity",
    "complete_async_activity_by_hash",
    "fail_async_activity",
    "fail_async_activity_by_hash",
    "force_release",
    "get_handle",
    "ownership_status",
    "purge",
    "query",
    "resume",
    "retry",
    "signal",
    "start",
    "suspend",
]


def signal_with_start(
    name: str, input: Any, workflow_id: str, signal: str, payload: Any = None
) -> WorkflowHandle:
    """Start ``name`` unless a live run has ``workflow_id``; signal it either way,
    atomically (``engine.operations.signal_with_start``)."""
    run, _message, _started = _signal_with_start(name, input, workflow_id, signal, payload)
    return WorkflowHandle(workflow_id, str(run.pk))


# The async twins (engine.aclient), bound last: each mirrors the sync function
# as this module defines it at import time.
astart = asyncify(start)
aget_handle = asyncify(get_handle)
asignal = asyncify(signal)
acancel = asyncify(cancel)
asuspend = asyncify(suspend)
aresume = asyncify(resume)
aretry = asyncify(retry)
aforce_release = asyncify(force_release)
acomplete_async_activity = asyncify(complete_async_activity)
afail_async_activity = asyncify(fail_async_activity)
acomplete_async_activity_by_hash = asyncify(complete_async_activity_by_hash)
afail_async_activity_by_hash = asyncify(fail_async_activity_by_hash)
aquery = asyncify(query)
apurge = asyncify(purge)
aownership_status = asyncify(ownership_status)
asignal_with_start = asyncify(signal_with_start)
aupdate = asyncify(update)
aget_events = asyncify(get_events)
alist_runs = asyncify(list_runs)
acount_runs = asyncify(count_runs)

__all__ += [
    "AttributeRange",
    "RunFilter",
    "RunSummary",
    "acancel",
    "acomplete_async_activity",
    "acomplete_async_activity_by_hash",
    "acount_runs",
    "afail_async_activity",
    "afail_async_activity_by_hash",
    "aforce_release",
    "aget_handle",
    "alist_runs",
    "aownership_status",
    "apurge",
    "aquery",
    "aresume",
    "aretry",
    "asignal",
    "asignal_with_start",
    "astart",
    "asuspend",
    "aupdate",
    "count_runs",
    "list_runs",
    "signal_with_start",
    "update",
]


# Bulk operations by filter: engine.operations.bulk.
def cancel_many(
    filter: RunFilter,
    *,
    dry_run: bool = False,
    allow_all: bool = False,
    reason: str = "",
    progress: Progress | None = None,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    actor: str = "client",
) -> BulkResult:
    """Cancel every live run ``filter`` matches (with its live descendants).

    In chunks of ``chunk_size`` runs, each one fenced batch: an interruption
    leaves each run cancelled or untouched, and calling again finishes the
    rest (runs already ended are ``skipped``). ``dry_run=True`` counts and
    changes nothing. An empty filter is refused (``InvalidRunFilter``)
    unless ``allow_all=True``. ``progress(done, total)`` after each chunk.
    A run whose workflow declares a ``cancel_grace`` gets the graceful
    request, as ``cancel`` would give it; one already asked is skipped.
    """
    return run_many(
        "cancel",
        filter,
        dry_run=dry_run,
        allow_all=allow_all,
        reason=reason,
        progress=progress,
        chunk_size=chunk_size,
        actor=actor,
    )


def resume_many(
    filter: RunFilter,
    *,
    dry_run: bool = False,
    allow_all: bool = False,
    reason: str = "",
    progress: Progress | None = None,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    actor: str = "client",
) -> BulkResult:
    """Resume every ``suspended`` run ``filter`` matches (as ``cancel_many``;
    ``reason`` is accepted for one shape and not recorded)."""
    return run_many(
        "resume",
        filter,
        dry_run=dry_run,
        allow_all=allow_all,
        reason=reason,
        progress=progress,
        chunk_size=chunk_size,
        actor=actor,
    )


def retry_many(
    filter: RunFilter,
    *,
    dry_run: bool = False,
    allow_all: bool = False,
    reason: str = "",
    progress: Progress | None = None,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    actor: str = "client",
) -> BulkResult:
    """Retry every ``failed`` or ``timed_out`` run ``filter`` matches that is
    still its workflow id's latest run (an older one is ``skipped``: retrying
    it would make two live runs of one id). As ``cancel_many`` otherwise."""
    return run_many(
        "retry",
        filter,
        dry_run=dry_run,
        allow_all=allow_all,
        reason=reason,
        progress=progress,
        chunk_size=chunk_size,
        actor=actor,
    )


acancel_many = asyncify(cancel_many)
aresume_many = asyncify(resume_many)
aretry_many = asyncify(retry_many)
__all__ += [
    "BulkResult",
    "acancel_many",
    "aresume_many",
    "aretry_many",
    "cancel_many",
    "resume_many",
    "retry_many",
]

# Schedules: engine.schedules.calls.
from weft_django.engine.schedules import calls as _schedules  # noqa: E402
from weft_django.engine.schedules.calls import (  # noqa: E402
    create_schedule,
    delete_schedule,
    describe_schedule,
    list_schedules,
    pause_schedule,
    resume_schedule,
    update_schedule,
)


def trigger_schedule(schedule_id: str) -> WorkflowHandle:
    """Start one run of the schedule now, outside its ticks; its handle."""
    return WorkflowHandle(*_schedules.trigger_schedule(schedule_id))


def backfill_schedule(schedule_id: str, start: datetime, end: datetime) -> list[WorkflowHandle]:
    """Start the run of every tick in ``[start, end]`` that has none yet; the
    handles of every tick's run, in tick order."""
    return [WorkflowHandle(*ids) for ids in _schedules.backfill_schedule(schedule_id, start, end)]


acreate_schedule = asyncify(create_schedule)
apause_schedule = asyncify(pause_schedule)
aresume_schedule = asyncify(resume_schedule)
atrigger_schedule = asyncify(trigger_schedule)
adelete_schedule = asyncify(delete_schedule)
aupdate_schedule = asyncify(update_schedule)
alist_schedules = asyncify(list_schedules)
abackfill_schedule = asyncify(backfill_schedule)
adescribe_schedule = asyncify(describe_schedule)

__all__ += [
    "abackfill_schedule",
    "acreate_schedule",
    "adelete_schedule",
    "adescribe_schedule",
    "alist_schedules",
    "apause_schedule",
    "aresume_schedule",
    "atrigger_schedule",
    "aupdate_schedule",
    "backfill_schedule",
    "create_schedule",
    "delete_schedule",
    "describe_schedule",
    "list_schedules",
    "pause_schedule",
    "resume_schedule",
    "trigger_schedule",
    "update_schedule",
]
# Events and streams (engine.published_reads); aread_stream is an async iterator.
__all__ += ["aget_event", "aget_events", "aread_stream", "get_event", "get_events", "read_stream"]
