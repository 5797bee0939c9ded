"""A turn that raised: count it, back off, and after a bound suspend the run.

Why this module exists: a turn can raise something no workflow step turns
into a failed run -- a bug in the engine, a stored value that no longer
decodes, a combinator the replay refuses (``ctx.all`` inside ``ctx.all``).
The run then stays ``running`` (or ``parked``), and the maintenance pass
used to re-drive it at once, every pass, forever, with nothing recorded.
``record_turn_failure`` is the ONE answer both transports give (the local
scheduler's turn threads and the Celery pool's task body call it):

* failure ``n < WEFT["TURN_MAX_FAILURES"]``: ``turn_failures = n`` and
  ``turn_retry_at = now + retry_delay_ms(n)`` (1 s, 2 s, 4 s, ... capped at
  ``MAX_RETRY_DELAY_MS``). Nothing drives the run before then: the
  maintenance pass and the Celery node's stranded finder skip it
  (``querysets.out_of_backoff_q``) and ``Engine.drive`` refuses it;
* a failure that is the database being unreachable (``is_database_outage``:
  too many clients, a refused or dropped connection) backs off like any
  other but never suspends the run: an outage is not the workflow's fault,
  and every run of the fleet would otherwise be parked by one;
* failure ``n == TURN_MAX_FAILURES``: the run becomes ``suspended`` with the
  error recorded (``errors_codec.error_record`` with its traceback), the claim
  released, and a WARNING logged with ``record.weft`` (event
  ``"turn_failures_exhausted"``). ``client.resume()`` makes it pending again
  with the counter reset; a turn that ends normally resets it too.

A turn can also end without raising: its engine dies (an activity or the
body kills the process). ``note_recovery`` is the answer to that, run by the
first turn under a claim taken over from another engine (on a Celery node,
also the first turn after a pool process died mid-turn under the node's own
claim: ``transports.celery.turn_marks``): when the run is
still ``running`` (the dead engine's turn never parked it), the turn died
with its engine. It is counted in ``WorkflowRun.recoveries`` (with the
engines lost and the journal position) by a fenced write before the body
runs again; at ``WEFT["MAX_RECOVERY_ATTEMPTS"]`` in a row the run is
suspended with ``CrashLoopError`` instead of being replayed (a WARNING, the
``weft_workflow_crash_loops_total`` counter), so a poison run cannot take
the fleet down one engine at a time. The commit that records the run's next
journal entry clears the count (progress), and so does ``client.resume``.

A run is ``running`` while a turn drives it because the turn says so
durably before any body code runs: a pickup writes ``running``, and a turn
that wakes a *parked* run first commits the ``turn started`` mark
(``mark_turn_started``: status ``running``, the turn's pid and start time,
through the turn's fenced checkpoint, so a deposed engine cannot write it).
Without that mark a wake that killed its engine before the turn's first
commit (``os._exit`` in the body right after a ``ctx.sleep``) left the run
``parked``, indistinguishable from a run that was never woken, and it went
round the fleet forever. Its cost is one commit per wake of a parked run,
and only under ``OWNERSHIP="workflow-lease"`` (the one mode with takeovers
to count). A death inside an activity attempt is not counted here: its
started marker (``engine.activities.started``) counts it against the
activity's own ``retries``, so ``note_recovery`` leaves a run with an
unsettled marker to that.

Both writes are fenced (``ownership.fence.fenced_commit`` through the turn's
own checkpoint, conditioned on the run's version and a drivable status): the
counter and the backoff stamp decide *whether* the run is driven, so unlike
a scheduling mark (``turn_pid``) they are workflow state, and a deposed
engine must not stamp them. They are durable, so the bound holds across
engines and restarts. When the fence fails the claim moved on: the new owner
counts its own attempts and nothing is written here.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Literal

from django import db
from django.db.models import F

from weft_django.engine.activities.started import MARKER_KIND
from weft_django.engine.host import TurnHost
from weft_django.engine.replay.errors_codec import error_record
from weft_django.engine.turn.commit import TurnAborted, TurnState
from weft_django.engine.turn.finish import stop
from weft_django.errors import CrashLoopError, EngineDeposedError
from weft_django.errors.payloads import PayloadUnreadable
from weft_django.models import DRIVABLE_STATUSES, JournalEntry, Timer, WorkflowRun
from weft_django.ownership.fence import fenced_commit
from weft_django.ownership.ops import RunCondition, Update

logger = logging.getLogger("weft_django.engine")

#: The backoff after the first failed turn; it doubles with each further one ...
BASE_RETRY_DELAY_MS = 1_000
#: ... up to this.
MAX_RETRY_DELAY_MS = 60_000

TurnFailureOutcome = Literal["retry", "suspended", "lost", "not-recorded"]
"""``retry``: backed off; ``suspended``: the bound was reached; ``lost``: the
run moved on (stopped, purged, another owner); ``not-recorded``: writing the
failure itself failed (the next pass tries the turn again)."""


@dataclass(frozen=True)
class TurnFailure:
    """What ``record_turn_failure`` did."""

    outcome: TurnFailureOutcome
    #: Turns in a row that raised, this one included (0 when not recorded).
    failures: int = 0
    #: No turn before this (engine clock, ms); ``None`` unless ``retry``.
    retry_at: int | None = None


def retry_delay_ms(failures: int) -> int:
    """The backoff after the ``failures``-th turn in a row that raised (>= 1)."""
    if isinstance(failures, bool) or not isinstance(failures, int) or failures < 1:
        raise ValueError(f"failures must be an integer >= 1, got {failures!r}")
    return min(MAX_RETRY_DELAY_MS, BASE_RETRY_DELAY_MS * 2 ** min(failures - 1, 30))


def is_database_outage(exc: BaseException) -> bool:
    """``exc`` (or what it was raised from) is the database failing to serve:
    a refused or dropped connection, too many clients, a server shutting
    down, a statement it cancelled (a deadlock, a timeout).

    Django raises these as ``OperationalError`` / ``InterfaceError``, which a
    later retry may pass; a query the server rejected for what it says (a
    constraint, bad data: ``IntegrityError``, ``DataError``) is another class
    and still counts toward the bound.
    """
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, (db.InterfaceError, db.OperationalError)):
            return True
        current = current.__cause__ or current.__context__
    return False


def record_turn_failure(host: TurnHost, run_id: Any, exc: BaseException) -> TurnFailure:
    """Count the turn of ``run_id`` that raised ``exc``; back off or suspend.

    Never raises: it runs in the handler of a turn that already failed. Every
    outcome is logged (the traceback at each retry, a structured WARNING at
    the bound).
    """
    try:
        return _record(host, run_id, exc)
    except Exception:
        logger.exception("could not record the failed turn of run %s", run_id)
        return TurnFailure("not-recorded")


def _record(host: TurnHost, run_id: Any, exc: BaseException) -> TurnFailure:
    db = host.settings.database
    run = WorkflowRun.objects.using(db).filter(pk=run_id).first()
    if run is None or run.status not in DRIVABLE_STATUSES:
        logger.warning("turn of run %s failed; the run has moved on", run_id, exc_info=exc)
        return TurnFailure("lost")
    failures = run.turn_failures + 1
    limit = host.settings.turn_max_failures
    try:
        # A payload that does not decode will not decode next time either;
        # a database that refused or dropped the connection is not the run's
        # fault: it backs off (up to the cap) but never suspends the run.
        if isinstance(exc, PayloadUnreadable) or (
            failures >= limit and not is_database_outage(exc)
        ):
            try:
                return _suspend(host, run, exc, failures)
            except (EngineDeposedError, TurnAborted):
                raise
            except Exception:
                # The bug may sit in the suspending path itself: back off
                # (at most ``MAX_RETRY_DELAY_MS`` apart) rather than re-drive
                # the run every pass; the next failure tries to suspend again.
                logger.exception("could not suspend %s; backing off instead", run.workflow_id)
                run.refresh_from_db(using=db)
        return _back_off(host, run, exc, failures)
    except (EngineDeposedError, TurnAborted):
        logger.warning(
            "turn of %s failed; the claim or the run moved on", run.workflow_id, exc_info=exc
        )
        return TurnFailure("lost")


def _back_off(host: TurnHost, run: WorkflowRun, exc: BaseException, failures: int) -> TurnFailure:
    retry_at = host.now_ms() + retry_delay_ms(failures)
    values = {"turn_failures": failures, "turn_retry_at": retry_at, "version": F("version") + 1}
    condition = RunCondition(
        run.pk, statuses=DRIVABLE_STATUSES, version=run.version, label="turn-failure"
    )
    result = fenced_commit(
        host,
        run.workflow_id,
        [condition],
        [Update(WorkflowRun, {"pk": run.pk}, values)],
        run_id=run.pk,
        run_version=run.version,
    )
    if not result.committed:  # written under us (a stop, a signal): the next pass decides
        logger.warning(
            "turn of %s failed; the run changed meanwhile", run.workflow_id, exc_info=exc
        )
        return TurnFailure("lost")
    logger.warning(
        "turn of %s (run %s) failed (%s of %s); retried in %s ms",
        run.workflow_id,
        run.pk,
        failures,
        host.settings.turn_max_failures,
        retry_at - host.now_ms(),
        exc_info=exc,
        extra={"weft": _fields(run, failures, exc, "turn_failed")},
    )
    return TurnFailure("retry", failures, retry_at)


def _suspend(host: TurnHost, run: WorkflowRun, exc: BaseException, failures: int) -> TurnFailure:
    error = error_record(exc, with_traceback=True)
    reason = f"turn failed {failures} times in a row: {error['type']}: {error['message']}"
    # The same fenced terminal checkpoint a diverged replay suspends with.
    stop(
        TurnState(host, run),
        "suspended",
        error=error,
        release=True,
        reason=reason,
        extra_values={"turn_failures": failures, "turn_retry_at": None},
    )
    logger.warning(
        "workflow %s (run %s) suspended: %s",
        run.workflow_id,
        run.pk,
        reason,
        exc_info=exc,
        extra={"weft": _fields(run, failures, exc, "turn_failures_exhausted")},
    )
    return TurnFailure("suspended", failures)


#: How many lost engines a run's recovery record names (the latest ones).
MAX_ENGINES_NAMED = 10


def mark_turn_started(turn: TurnState) -> None:
    """Before a turn runs the body of a parked run, record it ``running``.

    ONE fenced commit (the turn's checkpoint: the claim fence and a drivable
    status; no journal entry, so it is not progress and leaves the crash-loop
    count alone). A later owner that takes the claim over and finds the run
    ``running`` knows this turn died with its engine (``note_recovery``).
    Nothing is written for a run already ``running`` (a pickup said so) or
    outside ``workflow-lease`` (no takeover reads it).
    """
    run, host = turn.run, turn.host
    if run.status != "parked" or turn.fresh:
        return
    if host.ownership != "workflow-lease" or host.registry is None:
        return
    turn.commit([])
    run.status = "running"


def note_recovery(turn: TurnState) -> bool:
    """Count the death of the previous owner's turn, if there was one; at the
    bound suspend the run with ``CrashLoopError``. ``True``: the run was
    suspended and the turn must not drive it."""
    host, run = turn.host, turn.run
    registry = host.registry
    lost = registry.pop_taken_from(run.workflow_id) if registry is not None else None
    if lost is None or turn.fresh or run.status != "running":
        return False
    if Timer.objects.using(turn.db).filter(run_id=run.pk, kind=MARKER_KIND).exists():
        # It died in an activity attempt: the attempt's started marker counts
        # that death against the activity's ``retries`` (``engine.activities.started``).
        return False
    prior = run.recoveries if isinstance(run.recoveries, dict) else {}
    count = int(prior.get("count", 0)) + 1
    engines = [*prior.get("engines", []), lost or "?"][-MAX_ENGINES_NAMED:]
    position = JournalEntry.objects.using(turn.db).filter(run_id=run.pk).count()
    record = {"count": count, "engines": engines, "position": position}
    limit = host.settings.max_recovery_attempts
    if count < limit:
        turn.commit([], run_values={"recoveries": record})
        run.recoveries = record
        logger.info(
            "turn of %s (run %s) died with engine %s (%s of %s in a row)",
            run.workflow_id,
            run.pk,
            lost,
            count,
            limit,
        )
        return False
    error = CrashLoopError(
        workflow_id=run.workflow_id, position=position, attempts=count, engines=tuple(engines)
    )
    stop(
        turn,
        "suspended",
        error=error_record(error),
        release=True,
        reason=str(error),
        extra_values={"recoveries": record},
    )
    host.metrics.record_crash_loop()
    logger.warning(
        "workflow %s (run %s) suspended: %s",
        run.workflow_id,
        run.pk,
        error,
        extra={
            "weft": {
                "event": "crash_loop",
                "workflow_id": run.workflow_id,
                "run_id": str(run.pk),
                "position": position,
                "recoveries": count,
                "engines": engines,
            }
        },
    )
    return True


def _fields(run: WorkflowRun, failures: int, exc: BaseException, event: str) -> dict[str, Any]:
    """The structured log fields: ids, the count and the exception's type (no payload)."""
    return {
        "event": event,
        "workflow_id": run.workflow_id,
        "run_id": str(run.pk),
        "failures": failures,
        "error_type": type(exc).__name__,
    }


__all__ = [
    "BASE_RETRY_DELAY_MS",
    "MAX_ENGINES_NAMED",
    "MAX_RETRY_DELAY_MS",
    "TurnFailure",
    "TurnFailureOutcome",
    "mark_turn_started",
    "note_recovery",
    "record_turn_failure",
    "retry_delay_ms",
]
