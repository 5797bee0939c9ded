"""The one start write: a new run of a workflow id, inserted only while no run
of that id is live.

Invariants, for every start (``client.start``, a schedule's tick, trigger
and backfill, ``signal_with_start``, a child):

- at most one live run per workflow id: the run is inserted under the
  partial unique constraint (``live_insert``: its ``IntegrityError`` is the
  batch's failed condition), never after a read alone;
- one run per idempotency key (the key's unique constraint); a second start
  with the key returns the first run, or ``IdempotencyConflictError`` when
  the key names another workflow;
- the row holds what the workflow declares unless the start says otherwise:
  its queue (``@workflow(queue=...)``), checked with priority and
  concurrency key before anything is written (``run_fields``);
- no start after a finished run unless the caller asked for a new one
  (``after_finished``);
- the start wake is announced on the commit that holds the row (the
  caller's transaction, or the batch's own): a rolled-back start wakes
  nobody.

``start`` is the external start (a ``pending`` run, nothing claimed). On a
database whose ops have ``supports_start_statement`` it is one statement
with the wake inside when nothing stands in its way; otherwise, or when it
inserted nothing, the batch path reads again and reports what stands in the
way. A child's start is the same row and the same ``live_insert``, committed
by its parent's fenced checkpoint instead (``engine.turn.child``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.db.models import signals

from weft_django import db as store
from weft_django.conf import get_settings
from weft_django.engine import tracing
from weft_django.engine.wakes import Wake, announce, backends
from weft_django.engine.workflow.definitions import get_workflow
from weft_django.engine.workflow.payload import normalize
from weft_django.errors import (
    IdempotencyConflictError,
    InvalidArgumentError,
    InvalidTransitionError,
    WorkflowAlreadyRunning,
)
from weft_django.kernel.ids import is_storable_text, validate_workflow_id
from weft_django.models import TERMINAL_STATUSES, WorkflowRun
from weft_django.ownership.batch import conditional_batch
from weft_django.ownership.ops import Condition, Insert, UniqueAbsence, Write


class UnknownQueueError(InvalidArgumentError):
    """A queue name that ``WEFT["QUEUES"]`` does not declare (an
    ``InvalidArgumentError`` -- so a ``WeftError`` and a ``ValueError`` -- with
    its own code)."""

    code = "unknown_queue"

    def __init__(self, queue: object, where: str = "queue") -> None:
        known = ", ".join(sorted(get_settings().queues)) or "none"
        super().__init__(
            where, f"{where} {queue!r:.300} is not declared in WEFT['QUEUES'] (declared: {known})"
        )
        self.queue = queue
        self.where = where

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.queue, self.where))


def validate_start(
    queue: str | None, priority: object, concurrency_key: object
) -> tuple[str | None, int, str | None]:
    """The checked queue fields of a start; raises before anything is written."""
    if queue is not None and (not isinstance(queue, str) or queue not in get_settings().queues):
        raise UnknownQueueError(queue)
    if isinstance(priority, bool) or not isinstance(priority, int):
        raise InvalidArgumentError(
            "priority", f"priority must be an integer, got {priority!r:.100}"
        )
    if not -(2**31) <= priority < 2**31:
        raise InvalidArgumentError("priority", f"priority must fit in 32 bits, got {priority!r}")
    if concurrency_key is not None and (
        not isinstance(concurrency_key, str)
        or not 0 < len(concurrency_key) <= 200
        or not is_storable_text(concurrency_key)
    ):
        raise InvalidArgumentError(
            "concurrency_key",
            "concurrency_key must be a string of 1 to 200 characters (no NUL, no lone "
            f"surrogate), got {concurrency_key!r:.300}",
        )
    return queue, priority, concurrency_key


def run_fields(
    queue: str | None,
    priority: object,
    concurrency_key: object,
    fairness_key: object = None,
    fairness_weight: object = None,
) -> dict[str, Any]:
    """The ``WorkflowRun`` fields of a start's flow control (none when it has none)."""
    queue, priority, concurrency_key = validate_start(queue, priority, concurrency_key)
    fairness_key, weight = validate_fairness(fairness_key, fairness_weight)
    for what, value in (
        ("concurrency_key", concurrency_key),
        ("fairness_key", fairness_key),
        ("fairness_weight", fairness_weight),
    ):
        if queue is None and value is not None:
            raise InvalidArgumentError(what, f"{what} {value!r:.300} needs a queue")
    fields: dict[str, Any] = {}
    if queue is not None:
        fields.update(queue=queue, priority=priority, concurrency_key=concurrency_key)
        fields.update(fairness_key=fairness_key or concurrency_key, fairness_weight=weight)
    elif priority:
        fields["priority"] = priority
    return fields


#: The largest ``fairness_weight`` (admissions per round of a fair queue).
MAX_FAIRNESS_WEIGHT = 1000


def validate_fairness(key: object, weight: object) -> tuple[str | None, int]:
    """A start's checked fairness key and weight (default 1)."""
    if key is not None and (
        not isinstance(key, str) or not 0 < len(key) <= 200 or not is_storable_text(key)
    ):
        raise InvalidArgumentError(
            "fairness_key",
            "fairness_key must be a string of 1 to 200 characters (no NUL, no lone "
            f"surrogate), got {key!r:.300}",
        )
    if weight is None:
        return key, 1
    if (
        isinstance(weight, bool)
        or not isinstance(weight, int)
        or not 0 < weight <= MAX_FAIRNESS_WEIGHT
    ):
        raise InvalidArgumentError(
            "fairness_weight",
            f"fairness_weight must be an integer from 1 to {MAX_FAIRNESS_WEIGHT}, "
            f"got {weight!r:.100}",
        )
    return key, weight


@dataclass(frozen=True)
class NewRun:
    """A start's checked arguments: what the new run's row holds."""

    name: str
    #: The input in its stored form (``normalize``d).
    input: Any
    workflow_id: str
    #: Flow control columns (``run_fields``): empty when the run has no queue.
    flow: dict[str, Any] = field(default_factory=dict)
    idempotency_key: str | None = None
    start_at: int | None = None
    deadline_at: int | None = None
    #: ``on_conflict="start-new"``: a finished run of the id does not stand in the way.
    after_finished: bool = False


def new_run(
    name: object,
    input: Any,
    workflow_id: object,
    *,
    queue: str | None = None,
    priority: object = 0,
    concurrency_key: object = None,
    fairness_key: object = None,
    fairness_weight: object = None,
) -> NewRun:
    """Check a start's common arguments, in this order, before anything is
    written: the name (``UnknownWorkflowType``), the flow control (the
    workflow's queue when ``queue`` is ``None``), the input, the workflow id."""
    if not isinstance(name, str):
        raise InvalidArgumentError("name", f"workflow name must be a string, got {name!r:.100}")
    definition = get_workflow(name)
    flow = run_fields(
        queue if queue is not None else definition.queue,
        priority,
        concurrency_key,
        fairness_key,
        fairness_weight,
    )
    stored_input = normalize("workflow input", input)
    return NewRun(name, stored_input, validate_workflow_id(workflow_id), flow)


def row(new: NewRun, **columns: Any) -> WorkflowRun:
    """The unsaved row of ``new``: ``pending`` unless ``columns`` say otherwise;
    its ``trace_context`` is the current span's (call it inside the start span)."""
    values: dict[str, Any] = {
        "workflow_id": new.workflow_id,
        "name": new.name,
        "status": "pending",
        "input": new.input,
        "idempotency_key": new.idempotency_key,
        "start_at": new.start_at,
        "deadline_at": new.deadline_at,
        "trace_context": tracing.carrier(),
        **new.flow,
    }
    values.update(columns)
    return WorkflowRun(**values)


@dataclass(frozen=True)
class Carried:
    """What a start carries into its one batch besides the row (fork, reset):
    the source's journal prefix (``rows``, built for the new row) and, for a
    reset, the ending of the live run it replaces (``conditions``, ``before``).
    Applied in the same batch as the insert: all or nothing."""

    rows: Callable[[WorkflowRun], Sequence[Write]]
    conditions: Sequence[Condition] = ()
    #: Written before the insert: a reset's ending of ``replaces``, so the
    #: live-run constraint holds when the new row goes in.
    before: Sequence[Write] = ()
    #: The pk of the live run ``before`` ends (it does not stand in the way).
    replaces: Any = None
    #: More columns of the new row (``continued_from``: the source run).
    columns: dict[str, Any] = field(default_factory=dict)


def live_insert(run: WorkflowRun) -> tuple[UniqueAbsence, Insert]:
    """The insert of ``run`` under "no live run of its workflow id", and that
    condition (what a lost race fails)."""
    absence = UniqueAbsence(f"live-run:{run.workflow_id}")
    return absence, Insert(run, absence)


def start(new: NewRun, carried: Carried | None = None) -> tuple[WorkflowRun, bool]:
    """Write ``new`` as a ``pending`` run: ``(run, True)``, or ``(run, False)``
    for the run its idempotency key already names. ``carried``: more rows in
    the same batch (a fork's journal prefix, a reset's ending of the live run).

    ``WorkflowAlreadyRunning`` when a live run holds the id;
    ``InvalidTransitionError`` after a finished one without ``after_finished``.
    No transaction of its own: inside the caller's, the one write is the
    batch's savepoint, and what keeps a concurrent start out is the unique
    constraint its insert fails on, not a transaction around the reads.
    """
    db = get_settings().database
    if new.idempotency_key is None and carried is None:
        run = _start_in_one_statement(new, db)
        if run is not None:
            return run, True
    runs = WorkflowRun.objects.using(db)
    existing = _keyed(new, db)
    if existing is not None:
        return existing, False
    previous = runs.latest_for(new.workflow_id)
    replaced = previous is not None and carried is not None and previous.pk == carried.replaces
    if previous is not None and not replaced:
        if previous.status not in TERMINAL_STATUSES:
            raise WorkflowAlreadyRunning(new.workflow_id, str(previous.pk))
        if not new.after_finished:
            raise InvalidTransitionError(new.workflow_id, previous.status, "start")
    run = row(new, **(carried.columns if carried is not None else {}))
    absence, insert = live_insert(run)
    conditions: list[Condition] = [absence]
    writes: list[Write] = [insert]
    if carried is not None:
        conditions = [*carried.conditions, absence]
        writes = [*carried.before, insert, *carried.rows(run)]
    if not conditional_batch(conditions, writes, using=db).committed:
        existing = _keyed(new, db)
        if existing is not None:
            return existing, False
        raise WorkflowAlreadyRunning(new.workflow_id)
    announce(Wake("start", str(run.pk), db, new.workflow_id, new.start_at, queue=run.queue or ""))
    return run, True


def _keyed(new: NewRun, db: str) -> WorkflowRun | None:
    """The run ``new``'s idempotency key names, if any (of the same workflow)."""
    if new.idempotency_key is None:
        return None
    found = WorkflowRun.objects.using(db).filter(idempotency_key=new.idempotency_key).first()
    if found is not None and found.name != new.name:
        raise IdempotencyConflictError(new.idempotency_key, found.name, new.name)
    return found


def _start_in_one_statement(new: NewRun, db: str) -> WorkflowRun | None:
    """The start as one statement, its wake inside when a backend rides it;
    ``None`` when the database cannot, a project listens to the run's save
    signals, or something stood in the way (the batch path then says what)."""
    vendor = store.ops(db)
    if (
        not vendor.supports_start_statement
        or signals.pre_save.has_listeners(WorkflowRun)
        or signals.post_save.has_listeners(WorkflowRun)
    ):
        return None
    run = row(new)
    wake = Wake("start", str(run.pk), db, new.workflow_id, new.start_at)
    riding = backends.in_statement(wake)
    inserted = vendor.insert_start(
        run,
        after_finished=new.after_finished,
        notify=riding[1] if riding is not None else None,
        using=db,
    )
    if not inserted:
        return None
    if riding is not None:
        wake = dataclasses.replace(wake, delivered_by=frozenset({riding[0]}))
    announce(wake)  # the other backends, on the caller's commit or now
    return run


def start_run(
    name: str, input: Any, workflow_id: str, idempotency_key: str | None
) -> tuple[WorkflowRun, bool]:
    """A schedule's start (traced as ``weft.start <name>``, source ``schedule``):
    ``start`` with the workflow's own flow control, after a finished run too."""
    with tracing.start_span(name, source="schedule", workflow_id=workflow_id) as span:
        new = new_run(name, input, workflow_id)
        new = dataclasses.replace(new, idempotency_key=idempotency_key, after_finished=True)
        run, created = start(new)
        tracing.annotate(span, run_id=str(run.pk), start_created=created)
        return run, created


__all__ = [
    "MAX_FAIRNESS_WEIGHT",
    "Carried",
    "NewRun",
    "UnknownQueueError",
    "live_insert",
    "new_run",
    "row",
    "run_fields",
    "start",
    "start_run",
    "validate_fairness",
    "validate_start",
]
