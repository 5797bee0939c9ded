"""Debounce: many starts of one ``(workflow, key)`` within a window, one run.

Invariants:

- exactly one run per burst, across processes: every call for a
  ``(workflow, key)`` first locks that pair's lock row (a ``QueueLock`` row
  named ``debounce:<digest>``, the same lock-first discipline as a queue's
  admission), so callers take turns and each sees the last one's commit;
- the burst's run is an ordinary delayed ``pending`` run written by the one
  start write (``operations.start``, so its queue applies); while it is still
  pending and not yet due, a call replaces its input and pushes its start
  back to ``now + period`` -- never past ``max_wait`` after the burst's first
  call -- as ONE conditional write on "still pending at this version"; a
  run an engine already took (or due now) ends the burst, and the call
  starts the next one;
- the burst's first instant is the engine clock's (``kernel.clock.now_ms``),
  kept in the run's workflow id (``debounce:<workflow>:<digest>:<ms>``), so
  ``max_wait`` is judged on the same clock as ``start_at``.
"""

from __future__ import annotations

import dataclasses
import hashlib

from django.db import transaction
from django.db.models import F

from weft_django.conf import get_settings
from weft_django.engine.operations.start import NewRun, start
from weft_django.engine.wakes import Wake, announce
from weft_django.kernel.clock import now_ms
from weft_django.models import WorkflowRun
from weft_django.ownership.batch import conditional_batch
from weft_django.ownership.ops import RunCondition, Update
from weft_django.ownership.slots import lock_queue


def digest(name: str, key: str) -> str:
    """A short stable name of ``(workflow, key)`` (ids and lock names stay bounded)."""
    return hashlib.sha256(f"{name}\x00{key}".encode()).hexdigest()[:20]


def id_prefix(name: str, key: str) -> str:
    """The workflow id prefix of every burst's run of ``(name, key)``."""
    return f"debounce:{name}:{digest(name, key)}:"


def debounce(new: NewRun, key: str, period_ms: int, max_wait_ms: int | None) -> WorkflowRun:
    """The run of the current burst of ``(new.name, key)``, its input and start
    moved to this call's; or a new burst's run (``new`` with its id and start)."""
    db = get_settings().database
    prefix = id_prefix(new.name, key)
    with transaction.atomic(using=db):
        lock_queue(f"debounce:{digest(new.name, key)}", db)
        now = now_ms()
        current = (
            WorkflowRun.objects.using(db)
            .filter(workflow_id__startswith=prefix, status="pending", start_at__gt=now)
            .order_by("-created_at")
            .first()
        )
        if current is not None:
            first = int(current.workflow_id.rsplit(":", 1)[1])
            at = _start_at(now, first, period_ms, max_wait_ms)
            values = {
                "input": new.input,
                "start_at": at,
                "deadline_at": _deadline(new, now, at),
                "version": F("version") + 1,
            }
            still = RunCondition(
                current.pk, statuses=frozenset({"pending"}), version=current.version
            )
            update = Update(WorkflowRun, {"pk": current.pk}, values)
            if conditional_batch([still], [update], using=db).committed:
                announce(Wake("start", str(current.pk), db, current.workflow_id, at))
                current.input, current.start_at = new.input, at
                return current
        at = _start_at(now, now, period_ms, max_wait_ms)
        burst = dataclasses.replace(
            new,
            workflow_id=f"{prefix}{now}",
            start_at=at,
            deadline_at=_deadline(new, now, at),
            after_finished=True,
        )
        run, _created = start(burst)
        return run


def _deadline(new: NewRun, now: int, at: int) -> int | None:
    """``execution_timeout`` counts from the run's start, not from the call."""
    return None if new.deadline_at is None else new.deadline_at + max(0, at - now)


def _start_at(now: int, first: int, period_ms: int, max_wait_ms: int | None) -> int:
    at = now + period_ms
    if max_wait_ms is not None:
        at = min(at, first + max_wait_ms)
    return at


__all__ = ["debounce", "digest", "id_prefix"]
