"""Atomic activities (``@activity(atomic=True)``): the body and its result in ONE transaction.

The invariant: an atomic activity's ORM writes on the weft database alias,
the journal entry of its result and the run's new state are committed by
one database transaction, conditioned on the claim fence -- or none of them
is. The result is written by the turn's ordinary checkpoint
(``TurnState.settle`` -> ``fenced_commit`` -> ``conditional_batch``), run
*inside* that transaction as a nested batch: there is no second write path.
If the fence fails (the engine was deposed, the run was cancelled,
suspended or timed out meanwhile) the batch raises and the whole
transaction rolls back, body included. A SIGKILL at any instant leaves
either both or neither; so the effect happens exactly once across crashes,
takeovers, cancels and retries.

Where it runs: on the turn thread, whose connection is the one the
checkpoint uses (Django connections are per thread). That is why an atomic
step is not on the activity executor: atomic steps of one run (its
``ctx.all`` branches) run one after another on its turn thread, while its
plain activities still run at once on the executor. On SQLite, where a
write transaction holds the database lock from ``BEGIN`` (``IMMEDIATE``),
this is also what keeps the lock cycle away: no other thread has to write
for the step to commit.

Lock order (no deadlock between a step's rows and the fence): the body
locks its own rows first; the fence locks claim then run rows last
(``ownership.batch``'s global order), in a batch that runs no user code and
waits on nothing but those rows. Nothing ever holds a claim or run lock
while waiting for an application row, so no cycle can form.

Time: ``timeout`` counts from the start of the body. On PostgreSQL the
transaction carries ``statement_timeout`` = the time left, so a blocked
query aborts; it is lifted again before the fence. Whenever the deadline
has passed by the time the body returned, the transaction rolls back and
the attempt fails as timed out, under the retry policy. Deadlocks,
serialization failures and SQLite's "database is locked" in the body (or at
``BEGIN``) roll back and fail the attempt under the same policy.
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import logging
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from django.conf import settings as django_settings
from django.db import DatabaseError, connections, transaction

from weft_django import db as store
from weft_django.engine.activities.attempt import ActivityOutcome
from weft_django.engine.activities.info import ActivityInfo, activity_scope, deadline_from_ms
from weft_django.engine.workflow.activity_definition import ActivityDefinition
from weft_django.errors.payloads import PayloadUnreadable
from weft_django.warnings import WeftAtomicOtherAliasWarning

logger = logging.getLogger("weft_django.engine")

#: PostgreSQL's ``query_canceled``: a statement ran past ``statement_timeout``.
QUERY_CANCELED = "57014"


class AtomicTimeout(TimeoutError):
    """An atomic activity's body outlived its ``timeout``: it was rolled back."""


@dataclass(frozen=True)
class AtomicResult:
    """How an atomic attempt ended.

    ``committed``: the checkpoint's return (the body's writes are durable with
    the result). Otherwise the transaction rolled back and ``failure`` is the
    attempt's outcome to record under the retry policy, or ``unrecordable``
    the error of a result that is not a valid payload.
    """

    committed: bool | None = None
    failure: ActivityOutcome | None = None
    unrecordable: BaseException | None = None


def run_atomic(
    definition: ActivityDefinition,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    info: ActivityInfo,
    *,
    db: str,
    clock_ms: Callable[[], int],
    prepare: Callable[[Any], Any],
    commit: Callable[[Any], bool],
) -> AtomicResult:
    """Run one atomic attempt on this thread and commit it with ``commit``.

    ``prepare(value)`` normalizes the result (raising for a bad payload);
    ``commit(value)`` is the turn's checkpoint of it, run inside the
    transaction. Whatever ``commit`` raises (``EngineDeposedError``,
    ``TurnAborted``, a database error) propagates after the rollback: the
    turn's in-memory state may already hold the result, so the turn must
    end and the run be driven again from its journal.
    """
    start = clock_ms()
    deadline = start + definition.timeout_ms if definition.timeout_ms is not None else None
    info = dataclasses.replace(info, deadline=deadline_from_ms(deadline))
    if info.control is not None:
        info.control.started_ms = info.control.last_beat_ms = start
    # What may fail without harm: BEGIN ("database is locked"), the body, the
    # deadline check -- the turn's state is untouched, the failure is the
    # attempt's. From ``commit`` on, the turn may hold the result in memory.
    stage = "body"
    try:
        with transaction.atomic(using=db):
            restore = _limit_statements(db, deadline, clock_ms)
            with _watch_other_aliases(db, definition.name), activity_scope(info):
                value = definition.fn(*args, **kwargs)
            if inspect.isawaitable(value):
                if inspect.iscoroutine(value):
                    value.close()
                raise TypeError(
                    f"activity {definition.name!r} returned an awaitable from a plain function"
                )
            if deadline is not None and clock_ms() >= deadline:
                raise AtomicTimeout(
                    f"atomic activity {definition.name!r} ran past its timeout of "
                    f"{definition.timeout_ms} ms; its transaction was rolled back"
                )
            stage = "prepare"
            value = prepare(value)
            stage = "commit"
            restore()
            committed = commit(value)
            stage = "end"  # leaving the block is the COMMIT
        return AtomicResult(committed=committed)
    except PayloadUnreadable:
        # A stored payload the body read does not decode: not the attempt's
        # failure (a retry reads the same bytes) but the run's -- it rolls
        # back and propagates, and the turn's failure handling suspends the
        # run naming the payload.
        raise
    except (Exception, SystemExit) as exc:  # SystemExit from user code too, as on a thread
        # (A KeyboardInterrupt is the process's, not the step's: it rolls back
        # and propagates.)
        if stage == "body":
            return AtomicResult(failure=_failed(exc))
        if stage == "prepare":
            return AtomicResult(unrecordable=exc)
        raise


def _failed(exc: BaseException) -> ActivityOutcome:
    cause = exc.__cause__
    timed_out = isinstance(exc, AtomicTimeout) or (
        isinstance(exc, DatabaseError) and getattr(cause, "sqlstate", None) == QUERY_CANCELED
    )
    return ActivityOutcome(False, error=exc, timed_out=timed_out)


def _limit_statements(
    db: str, deadline: int | None, clock_ms: Callable[[], int]
) -> Callable[[], None]:
    """On PostgreSQL, bound each statement of the body by the time left; returns
    the call that lifts the bound again (before the fence)."""
    vendor = store.ops(db)
    if deadline is None or not vendor.supports_statement_timeout:
        return _nothing
    left = deadline - clock_ms()
    if left <= 0:
        raise AtomicTimeout("the atomic activity's deadline passed before it started")
    before = vendor.set_local_statement_timeout(db, left)

    def restore() -> None:
        vendor.restore_statement_timeout(db, before)

    return restore


def _nothing() -> None:
    return None


_warned: set[tuple[str, str]] = set()


@contextmanager
def _watch_other_aliases(db: str, activity: str) -> Iterator[None]:
    """Warn (``WeftAtomicOtherAliasWarning``) when the body writes through another alias.

    Every statement that is not a plain ``SELECT`` on another alias counts
    (reads there are harmless; writes are not covered by the transaction).
    """
    others = [alias for alias in django_settings.DATABASES if alias != db]
    used: set[str] = set()
    wrappers = []
    for alias in others:

        def wrapper(execute: Any, sql: Any, params: Any, many: Any, ctx: Any, alias=alias) -> Any:
            if not str(sql).lstrip()[:6].upper().startswith("SELECT"):
                used.add(alias)
            return execute(sql, params, many, ctx)

        wrappers.append((alias, wrapper))
        connections[alias].execute_wrappers.append(wrapper)
    try:
        yield
    finally:
        for alias, wrapper in wrappers:
            connections[alias].execute_wrappers.remove(wrapper)
        for alias in sorted(used):
            if (activity, alias) not in _warned:
                _warned.add((activity, alias))
                # A project running with -W error: the turn goes on.
                with contextlib.suppress(Exception):
                    warnings.warn(WeftAtomicOtherAliasWarning(activity, alias), stacklevel=3)
                logger.warning(
                    "atomic activity %r wrote through the alias %r (not covered)", activity, alias
                )


__all__ = ["AtomicResult", "AtomicTimeout", "WeftAtomicOtherAliasWarning", "run_atomic"]
