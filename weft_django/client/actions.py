"""The actions on one workflow id: signal, cancel, suspend, resume, retry,
force_release, async-activity settlement, query, purge, ownership_status.

Invariants: every write goes through the conditional batch
(``engine.operations``), inside the caller's transaction when there is one,
its wakes sent on that commit; arguments are checked before anything is
written. ``query`` replays the journal read-only in this process and writes
nothing. ``ownership_status`` judges expiry by the one rule of the read
model (``inspection.rules.claim_state``), as the admin, ``weft_status`` and
``/metrics`` do.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from weft_django.client.aio import asyncify
from weft_django.conf import get_settings
from weft_django.engine import operations
from weft_django.engine.journal import load_events
from weft_django.engine.operations import latest_run
from weft_django.engine.replay.machine import Replay
from weft_django.engine.workflow.definitions import get_workflow
from weft_django.engine.workflow.payload import normalize
from weft_django.errors import InvalidArgumentError, UnknownQuery, WorkflowNotFound
from weft_django.inspection.rules import claim_state
from weft_django.kernel.clock import now_ms
from weft_django.kernel.ids import check_lookup_id, check_name
from weft_django.models import WorkflowClaim, WorkflowRun
from weft_django.ownership.codec import decode_holder_row

signal = operations.signal
asignal = asyncify(signal)
cancel = operations.cancel
acancel = asyncify(cancel)
suspend = operations.suspend
asuspend = asyncify(suspend)
resume = operations.resume
aresume = asyncify(resume)
retry = operations.retry
aretry = asyncify(retry)
force_release = operations.force_release
aforce_release = asyncify(force_release)


def complete_async_activity(token: str, result: Any = None) -> None:
    operations.settle_async(token, result=normalize("async activity result", result))


acomplete_async_activity = asyncify(complete_async_activity)


def fail_async_activity(token: str, error: Any = "failed") -> None:
    operations.settle_async(token, error=_async_error_record(error))


afail_async_activity = asyncify(fail_async_activity)


def complete_async_activity_by_hash(token_hash: str, result: Any = None) -> None:
    """``complete_async_activity`` naming the row by its stored SHA-256 (the admin's
    staff action: the raw token is never stored)."""
    operations.settle_async_hash(token_hash, result=normalize("async activity result", result))


acomplete_async_activity_by_hash = asyncify(complete_async_activity_by_hash)


def fail_async_activity_by_hash(token_hash: str, error: Any = "failed") -> None:
    """``fail_async_activity`` naming the row by its stored SHA-256."""
    operations.settle_async_hash(token_hash, error=_async_error_record(error))


afail_async_activity_by_hash = asyncify(fail_async_activity_by_hash)


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


aquery = asyncify(query)


def purge(
    workflow_id: str | None = None,
    *,
    ids: list[str] | None = None,
    older_than: timedelta | None = None,
    children: bool = False,
) -> int:
    """Delete finished runs; how many. One of: ``workflow_id`` (its runs), ``ids``
    (a list of workflow ids: all of their runs, in one batch) or ``older_than``
    (retention: terminal runs finished longer ago). ``children=True`` (with
    ``workflow_id`` or ``ids``) also purges descendants: runs whose parent is a
    purged run, recursively. A live run among them refuses the whole purge
    (``InvalidTransitionError`` naming it and its status); nothing is deleted."""
    given = [
        name for name, value in (("workflow_id", workflow_id), ("ids", ids)) if value is not None
    ]
    if older_than is not None:
        given.append("older_than")
    if len(given) != 1:
        raise InvalidArgumentError(
            "older_than", f"give one of workflow_id, ids or older_than, got {given or 'none'}"
        )
    if not isinstance(children, bool):
        raise InvalidArgumentError("children", f"children must be True or False, got {children!r}")
    if ids is not None:
        return operations.purge_ids(_purge_ids(ids), children=children)
    if workflow_id is not None:
        if children:
            return operations.purge_ids([check_lookup_id(workflow_id)], children=True)
        return operations.purge(check_lookup_id(workflow_id))
    if children:
        raise InvalidArgumentError("children", "children=True purges with workflow_id or ids")
    if not isinstance(older_than, timedelta) or not timedelta(0) <= older_than <= datetime.now(
        UTC
    ) - datetime(1, 1, 2, tzinfo=UTC):
        raise InvalidArgumentError(
            "older_than",
            "older_than must be a non-negative timedelta reaching no further back than the "
            f"year 1, got {older_than!r:.100}",
        )
    return operations.purge_older_than(older_than)


def _purge_ids(ids: object) -> list[str]:
    """``ids`` as a non-empty list of workflow ids (a lone string is refused: it
    would purge one id per character)."""
    if isinstance(ids, str) or not isinstance(ids, list | tuple) or not ids:
        raise InvalidArgumentError(
            "ids", f"ids must be a non-empty list of workflow ids, got {ids!r:.200}"
        )
    return [check_lookup_id(value) for value in ids]


apurge = asyncify(purge)


def ownership_status(workflow_id: str) -> dict[str, Any]:
    """The owner of ``workflow_id``: its run's status, the claim's epoch, the
    holder (``None`` when released or corrupt) and whether another engine may
    take it over (``expired``: ``claim_state``)."""
    settings = get_settings()
    db = settings.database
    run = WorkflowRun.objects.using(db).latest_for(check_lookup_id(workflow_id))
    claim = WorkflowClaim.objects.using(db).filter(pk=workflow_id).first()
    if run is None and claim is None:
        raise WorkflowNotFound(workflow_id)
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
        expired = claim_state(claim, now_ms(), settings) == "expired"
    return {
        "workflow_id": workflow_id,
        "status": run.status if run is not None else None,
        "epoch": claim.epoch if claim is not None else 0,
        "holder": holder,
        "expired": expired,
    }


aownership_status = asyncify(ownership_status)

__all__ = [
    "acancel",
    "acomplete_async_activity",
    "acomplete_async_activity_by_hash",
    "afail_async_activity",
    "afail_async_activity_by_hash",
    "aforce_release",
    "aownership_status",
    "apurge",
    "aquery",
    "aresume",
    "aretry",
    "asignal",
    "asuspend",
    "cancel",
    "complete_async_activity",
    "complete_async_activity_by_hash",
    "fail_async_activity",
    "fail_async_activity_by_hash",
    "force_release",
    "ownership_status",
    "purge",
    "query",
    "resume",
    "retry",
    "signal",
    "suspend",
]
