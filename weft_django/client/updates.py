"""``client.update``: a validated request to a running workflow, and its answer.

Invariant: validated in the caller, applied in the owner. The validator must be
able to refuse an update with *no trace* -- so it runs here, before anything
is written, on a read-only replay of the journal (database access refused,
like ``client.query``); raising it is ``UpdateRejected``. Only an accepted
update is written: one ``UpdateRequest`` row per ``(run, update_id)`` (the
unique constraint keeps a second caller with the same id out), with the
run's ``wake_seq`` bump and a ``signal`` wake, like ``client.signal``. The
owner then applies it in its turn (``engine.turn.update``) and records the
answer in the journal under the claim fence; the caller waits for that
``update-done`` entry (``engine.turn.update_answers``: NOTIFY on PostgreSQL,
polling elsewhere). So the same ``update_id`` is applied once and always
returns the recorded answer -- across a SIGKILL of the owner, too.

It waits for a commit by the engine, so it cannot wait inside a transaction
that holds its own write back: it refuses to (``RuntimeError``), unless
``timeout=0`` (submit only: the request commits with the caller's
transaction, and a later call with the same ``update_id`` gets the answer).
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from django.db import connections
from django.db.models import F

from weft_django.client.aio import asyncify
from weft_django.conf import get_settings
from weft_django.engine.journal import load_events
from weft_django.engine.operations import latest_run
from weft_django.engine.replay.errors_codec import rebuild_error
from weft_django.engine.replay.machine import Replay
from weft_django.engine.replay.sandbox import database_refused, json_copy
from weft_django.engine.turn.update_answers import DONE_EVENT, answer_key
from weft_django.engine.wakes import announce_event, backends
from weft_django.engine.workflow.definitions import get_workflow
from weft_django.engine.workflow.payload import normalize
from weft_django.errors import (
    InvalidArgumentError,
    InvalidTransitionError,
    UnknownUpdate,
    UpdateRejected,
    WorkflowTimeoutError,
)
from weft_django.kernel.clock import now_ms
from weft_django.kernel.ids import check_name, is_storable_text
from weft_django.models import (
    LIVE_STATUSES,
    TERMINAL_STATUSES,
    JournalEntry,
    UpdateRequest,
    WorkflowRun,
)
from weft_django.ownership.batch import conditional_batch
from weft_django.ownership.ops import Insert, RunCondition, UniqueAbsence, Update

MAX_UPDATE_ID = 200


def update(
    workflow_id: str,
    name: str,
    *args: Any,
    update_id: str | None = None,
    timeout: float = 30,
) -> Any:
    """Ask the running workflow's ``ctx.on_update(name, ...)`` handler; its answer.

    ``UpdateRejected`` when the validator raised (nothing recorded),
    ``UnknownUpdate`` when the workflow has no such handler,
    ``WorkflowNotFound`` for an unknown workflow, ``InvalidTransitionError``
    when the run ended before answering, ``WorkflowTimeoutError`` after
    ``timeout`` seconds (the update stays accepted: calling again with the
    same ``update_id`` waits for the same answer). The handler's exception is
    raised again here (rebuilt from the recorded error).
    """
    check_name("update", name)
    given = update_id is not None
    if update_id is None:
        update_id = str(uuid.uuid4())
    if (
        not isinstance(update_id, str)
        or not 0 < len(update_id) <= MAX_UPDATE_ID
        or not is_storable_text(update_id)
    ):
        raise InvalidArgumentError(
            "update_id",
            f"update_id must be a string of 1 to {MAX_UPDATE_ID} characters, "
            f"got {update_id!r:.300}",
        )
    if (
        isinstance(timeout, bool)
        or not isinstance(timeout, int | float)
        or not 0 <= timeout < float("inf")
    ):
        raise InvalidArgumentError(
            "timeout", f"timeout must be a number of seconds, got {timeout!r:.100}"
        )
    stored_args = normalize(f"arguments of update {name!r}", list(args))
    db = get_settings().database
    if timeout > 0 and connections[db].in_atomic_block:
        raise RuntimeError(
            "client.update() waits for the owning engine, which cannot see writes of an open "
            "transaction: call it outside transaction.atomic() (the API view is non-atomic), "
            "or with timeout=0 to only submit it"
        )
    run = latest_run(workflow_id, db)
    # Subscribed before any read: an answer committed after it is announced to it.
    waiter = backends.done_waiter(db, answer_key(run.pk, update_id)) if timeout > 0 else None
    try:
        # A fresh id cannot have been used: no reads for it (two statements less).
        fresh = not given or (
            _answer(run.pk, update_id, db) is None and not _requested(run.pk, update_id, db)
        )
        if fresh:
            _accept(run, name, stored_args, update_id, db)
        return _wait(run, name, update_id, timeout, db, waiter, just_accepted=fresh)
    finally:
        if waiter is not None:
            waiter.close()


aupdate = asyncify(update)


def validate(run: WorkflowRun, name: str, args: list[Any]) -> None:
    """Run the validator on a read-only replay; raise ``UnknownUpdate`` /
    ``UpdateRejected``. Nothing is written."""
    replay = Replay(
        get_workflow(run.name),
        workflow_id=run.workflow_id,
        run_id=str(run.pk),
        input=run.input,
        events=load_events(run.pk, get_settings().database),
        clock_ms=now_ms,
        record=False,
    )
    replay.advance()
    entry = replay.ctx.update_handlers.get(name)
    if entry is None:
        raise UnknownUpdate(run.workflow_id, name, sorted(replay.ctx.update_handlers))
    validator = entry[1]
    if validator is None:
        return
    with database_refused():
        try:
            validator(*json_copy(args))
        except Exception as exc:
            raise UpdateRejected(run.workflow_id, name, str(exc) or type(exc).__name__) from exc


def _accept(run: WorkflowRun, name: str, args: list[Any], update_id: str, db: str) -> None:
    if run.status in TERMINAL_STATUSES:
        raise InvalidTransitionError(run.workflow_id, run.status, "update")
    validate(run, name, args)
    once = UniqueAbsence(f"update:{update_id}")
    result = conditional_batch(
        [RunCondition(run.pk, statuses=frozenset(LIVE_STATUSES)), once],
        [
            Insert(UpdateRequest(run_id=run.pk, update_id=update_id, name=name, args=args), once),
            Update(WorkflowRun, {"pk": run.pk}, {"wake_seq": F("wake_seq") + 1}),
        ],
        using=db,
    )
    if result.committed:
        announce_event("signal", run.pk, db, workflow_id=run.workflow_id)
        return
    if result.failed_condition is once:
        return  # another caller with the same update_id got there first: wait for it
    status = WorkflowRun.objects.using(db).filter(pk=run.pk).values_list("status", flat=True)
    raise InvalidTransitionError(run.workflow_id, str(status.first() or "purged"), "update")


def _answer(run_id: Any, update_id: str, db: str) -> JournalEntry | None:
    return (
        JournalEntry.objects.using(db)
        .filter(run_id=run_id, kind=DONE_EVENT, target=update_id)
        .only("result", "error")
        .first()
    )


def _requested(run_id: Any, update_id: str, db: str) -> bool:
    return UpdateRequest.objects.using(db).filter(run_id=run_id, update_id=update_id).exists()


def _wait(
    run: WorkflowRun,
    name: str,
    update_id: str,
    timeout: float,
    db: str,
    waiter: Any,
    *,
    just_accepted: bool,
) -> Any:
    """Block until the answer is recorded. With a waiter (subscribed before the
    request was written) an answer is announced to it, so a request this call
    just wrote is not read for until the waiter fires or a second passed; the
    run's status is read only when no announcement came."""
    deadline = time.monotonic() + timeout
    delay = 0.005
    announced = False
    skip_read = just_accepted and waiter is not None
    while True:
        if not skip_read:
            entry = _answer(run.pk, update_id, db)
            if entry is not None:
                if entry.error is not None:
                    raise rebuild_error(entry.error)
                return (entry.result or {}).get("result")
            if not announced:
                status = WorkflowRun.objects.using(db).filter(pk=run.pk)
                current = status.values_list("status", flat=True).first()
                if current is None or current in TERMINAL_STATUSES:
                    raise InvalidTransitionError(
                        run.workflow_id, str(current or "purged"), "update"
                    )
        skip_read = False
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise WorkflowTimeoutError(run.workflow_id, f"the answer to update {name!r}")
        if waiter is not None:
            announced = bool(waiter.wait(min(1.0, remaining)))
        else:
            time.sleep(min(delay, remaining))
            delay = min(delay * 2, 0.25)


__all__ = ["aupdate", "update", "validate"]
