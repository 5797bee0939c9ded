"""Durable state only (SPEC §4.1): claims, claim events, the mode marker, the
global lease, engine records, and the runs with their journal, timers,
buffered signals, async activities and activity heartbeats.

Why these shapes:
- ``WorkflowClaim`` is keyed by the workflow id, not a foreign key: it
  outlives every run of that id (never deleted), so the epoch sequence is
  never reset and an old wake can never match a new generation (ABA).
- Holder columns are typed and nullable; the holder is "absent" only when all
  three are null. A half-null row is corrupt and decodes to nothing.
- Timestamps of the claim protocol are integer milliseconds of the engine
  clock, as in weft; singletons are ensured-then-locked (no data migration).
"""

from __future__ import annotations

import uuid

from django.db import models
from django.db.models import F, Q

from weft_django.models.choices import (
    CLAIM_EVENT_KINDS,
    DRIVABLE_STATUSES,
    LIVE_STATUSES,
    RUN_STATUSES,
    TERMINAL_STATUSES,
    AsyncStatus,
    ClaimEventKind,
    ClaimEventKindValue,
    RunStatus,
    RunStatusValue,
    TimerKind,
)
from weft_django.models.querysets import (
    EngineRecordQuerySet,
    TimerQuerySet,
    WorkflowClaimQuerySet,
    WorkflowRunQuerySet,
    corrupt_claims_q,
)
from weft_django.models.schedules import Schedule  # the schedules' row (issue #16)

__all__ = [
    "CLAIM_EVENT_KINDS",
    "DRIVABLE_STATUSES",
    "LIVE_STATUSES",
    "RUN_STATUSES",
    "TERMINAL_STATUSES",
    "ActivityHeartbeat",
    "AsyncActivity",
    "AsyncStatus",
    "ClaimEvent",
    "ClaimEventKind",
    "ClaimEventKindValue",
    "EngineRecord",
    "GlobalLease",
    "JournalEntry",
    "MetricTotals",
    "OwnershipModeMarker",
    "QueueLock",
    "QueueSlot",
    "RoutedAttempt",
    "RoutedStatus",
    "RunSearchAttribute",
    "RunStatus",
    "RunStatusValue",
    "Schedule",
    "SignalMessage",
    "StreamEntry",
    "Timer",
    "TimerKind",
    "UpdateRequest",
    "WorkflowClaim",
    "WorkflowEvent",
    "WorkflowRun",
]


class WorkflowClaim(models.Model):
    """A workflow id's ownership record; the row is the per-workflow mutex."""

    workflow_id = models.CharField(max_length=200, primary_key=True)
    epoch = models.BigIntegerField(default=0, help_text="0 = never claimed")
    # Indexed with the workflow id (``weft_claim_engine_idx``), not alone.
    engine_id = models.CharField(max_length=200, null=True, blank=True)
    expires_at = models.BigIntegerField(null=True, blank=True, help_text="engine clock, ms")
    claimed_at = models.BigIntegerField(null=True, blank=True, help_text="engine clock, ms")

    objects = WorkflowClaimQuerySet.as_manager()

    class Meta:
        verbose_name = "holder"
        verbose_name_plural = "holders"
        indexes = [
            models.Index(fields=["expires_at"], name="weft_claim_expires_idx"),
            # One engine's claims (scope "engine" renewal, the owned-runs scope)
            # and, in workflow-id order, a capped count of them (``weft_status``,
            # ``/metrics``) that reads no more than its cap of index entries.
            models.Index(fields=["engine_id", "workflow_id"], name="weft_claim_engine_idx"),
            # The reclaim scan and the expired-claims count look for released or
            # corrupt holders; in a healthy cluster they are few among every
            # workflow's claim, so a partial index finds them without a table scan.
            models.Index(
                fields=["workflow_id"], condition=corrupt_claims_q(), name="weft_claim_odd_idx"
            ),
        ]

    def __str__(self) -> str:
        holder = self.engine_id or "-"
        return f"{self.workflow_id} @ epoch {self.epoch} held by {holder}"


class ClaimEvent(models.Model):
    """Append-only history of claim transitions, written in the same batch."""

    workflow_id = models.CharField(max_length=200, db_index=True)
    epoch = models.BigIntegerField()
    engine_id = models.CharField(max_length=200, blank=True, default="")
    kind = models.CharField(max_length=16, choices=ClaimEventKind.choices)
    at_ms = models.BigIntegerField()
    reason = models.CharField(max_length=200, blank=True, default="")
    # The holder that was replaced (takeover, rotation): kept so safety can be
    # checked from records alone (a takeover's claimed_at > old expires_at + grace).
    previous_engine_id = models.CharField(max_length=200, blank=True, default="")
    previous_expires_at = models.BigIntegerField(null=True, blank=True)

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return f"{self.kind} {self.workflow_id} epoch {self.epoch} by {self.engine_id or '-'}"


class OwnershipModeMarker(models.Model):
    """Store-wide singleton: the fencing mode every engine must agree on."""

    key = models.CharField(max_length=16, primary_key=True, default="marker")
    mode = models.CharField(max_length=32)
    established_at = models.BigIntegerField()

    class Meta:
        verbose_name = "ownership mode marker"

    def __str__(self) -> str:
        return f"{self.mode} (since {self.established_at})"


class GlobalLease(models.Model):
    """The ``lease`` mode singleton, fenced on its epoch (SPEC §4.10)."""

    key = models.CharField(max_length=16, primary_key=True, default="lease")
    epoch = models.BigIntegerField(default=0)
    holder_id = models.CharField(max_length=200, null=True, blank=True)
    expires_at = models.BigIntegerField(null=True, blank=True)

    def __str__(self) -> str:
        return f"lease epoch {self.epoch} held by {self.holder_id or '-'}"


class EngineRecord(models.Model):
    """One row per engine boot, with its heartbeat and exported counters."""

    engine_id = models.CharField(max_length=200, primary_key=True)
    node_name = models.CharField(max_length=200, blank=True, default="")
    host = models.CharField(max_length=200, blank=True, default="")
    pid = models.IntegerField(null=True, blank=True)
    mode = models.CharField(max_length=32)
    pool = models.CharField(max_length=32, blank=True, default="")
    transport = models.CharField(max_length=32, blank=True, default="")
    started_at = models.BigIntegerField()
    heartbeat_at = models.BigIntegerField()
    stopped_at = models.BigIntegerField(null=True, blank=True)
    metrics = models.JSONField(default=dict, blank=True)
    # The second int4 of this engine's session-level advisory lock
    # (``ownership.presence``); NULL: no session presence (SQLite, lease mode,
    # WEFT["SESSION_PRESENCE"] off, an older engine) -- the TTL path alone.
    presence_key = models.IntegerField(null=True, blank=True)

    objects = EngineRecordQuerySet.as_manager()

    class Meta:
        verbose_name = "engine"
        ordering = ["-started_at"]

    def __str__(self) -> str:
        return self.engine_id


class MetricTotals(models.Model):
    """The folded counters of pruned ``EngineRecord`` rows (one row, ``pk=1``).

    A record is deleted only in the transaction that adds its counters here,
    so the cluster totals (this row plus every remaining record) never
    decrease across a prune: a scraper sees no counter reset.
    """

    id = models.PositiveSmallIntegerField(primary_key=True, default=1)
    metrics = models.JSONField(default=dict, blank=True)
    records_folded = models.BigIntegerField(default=0)
    updated_at = models.BigIntegerField(default=0)

    class Meta:
        verbose_name = "metric totals"
        verbose_name_plural = "metric totals"

    def __str__(self) -> str:
        return f"metric totals ({self.records_folded} engine records folded)"


class WorkflowRun(models.Model):
    """One generation (run) of a workflow id."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    workflow_id = models.CharField(max_length=200, db_index=True)
    name = models.CharField(max_length=200)
    status = models.CharField(
        max_length=16, choices=RunStatus.choices, default=RunStatus.PENDING, db_index=True
    )
    input = models.JSONField(null=True, blank=True)
    result = models.JSONField(null=True, blank=True)
    error = models.JSONField(null=True, blank=True)
    idempotency_key = models.CharField(max_length=255, null=True, blank=True, unique=True)
    parent = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="children"
    )
    parent_position = models.IntegerField(null=True, blank=True)
    continued_from = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # Version: the fence under OWNERSHIP="none"; bumped by every write.
    version = models.BigIntegerField(default=0)
    start_at = models.BigIntegerField(null=True, blank=True, help_text="delayed start, ms")
    deadline_at = models.BigIntegerField(null=True, blank=True, help_text="execution timeout, ms")
    wake_at = models.BigIntegerField(null=True, blank=True, help_text="earliest timer, ms")
    # Bumped by every external non-terminal event (signal, async completion,
    # child completion, resume); a parked run needs a turn while
    # ``wake_seq > parked_seq``. The park batch is conditioned on the value it
    # read, so a signal that lands mid-turn is never lost.
    wake_seq = models.BigIntegerField(default=0)
    parked_seq = models.BigIntegerField(default=0)
    turn_started_at = models.BigIntegerField(null=True, blank=True)
    turn_pid = models.IntegerField(null=True, blank=True)
    # Turns in a row that raised out of the engine (``engine.turn_failures``):
    # the run is not driven again before ``turn_retry_at`` (engine clock, ms);
    # at ``WEFT["TURN_MAX_FAILURES"]`` it is suspended with the error. Reset
    # by a turn that ends normally and by resume/retry.
    turn_failures = models.IntegerField(default=0)
    turn_retry_at = models.BigIntegerField(
        null=True, blank=True, help_text="no turn before this, ms (a failed turn's backoff)"
    )
    suspended_reason = models.TextField(blank=True, default="")
    # A cancel with a grace (``operations.stop``): set in the batch that rotates
    # the claim; the next turn delivers ``WorkflowCancelled`` into the body
    # (a ``cancel`` journal event) and the run ends ``cancelled`` by itself, or
    # is ended at once when ``cancel_deadline_at`` (engine clock, ms) passes.
    cancel_requested_at = models.DateTimeField(null=True, blank=True, db_index=True)
    cancel_reason = models.TextField(blank=True, default="")
    cancel_deadline_at = models.BigIntegerField(
        null=True, blank=True, help_text="end of the cancel grace, ms"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    # Moved by every write of the row: ``auto_now`` for ``save()``, and
    # ``ownership.ops.stamped`` for the fenced batch's ``UPDATE`` of a run.
    updated_at = models.DateTimeField(auto_now=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # Flow control (``engine.queues``): a run with a queue is admitted only
    # with a slot of that queue; higher ``priority`` first, FIFO within one.
    queue = models.CharField(max_length=100, null=True, blank=True, db_index=True)
    priority = models.IntegerField(default=0)
    concurrency_key = models.CharField(max_length=200, null=True, blank=True)
    # Tracing (the ``otel`` extra): the W3C carrier (``traceparent``,
    # ``tracestate``) of the span that started the run, so an engine or a Celery
    # node on another machine continues the caller's trace. Ids only, never data.
    trace_context = models.JSONField(null=True, blank=True)

    objects = WorkflowRunQuerySet.as_manager()

    class Meta:
        verbose_name = "workflow run"
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["workflow_id"],
                condition=Q(status__in=LIVE_STATUSES),
                name="weft_one_live_run_per_workflow_id",
            )
        ]
        indexes = [
            models.Index(fields=["status", "wake_at"], name="weft_run_status_wake_idx"),
            # The API's ``?updated_after=`` / ``?updated_before=`` ("changed since").
            models.Index(fields=["updated_at"], name="weft_run_updated_idx"),
            # ``RunFilter`` (list_runs, the API, the admin, bulk operations):
            # newest first, and the created/finished time ranges.
            models.Index(fields=["created_at"], name="weft_run_created_idx"),
            models.Index(fields=["finished_at"], name="weft_run_finished_idx"),
            models.Index(fields=["name", "created_at"], name="weft_run_name_created_idx"),
            # What every maintenance pass asks of the live runs (time-outs, the
            # poll back-off's next due time): few runs carry these times, so
            # partial indexes keep the pass from reading every parked run.
            models.Index(
                fields=["deadline_at"],
                condition=Q(deadline_at__isnull=False, status__in=LIVE_STATUSES),
                name="weft_run_live_deadline_idx",
            ),
            models.Index(
                fields=["cancel_deadline_at"],
                condition=Q(cancel_deadline_at__isnull=False, status__in=LIVE_STATUSES),
                name="weft_run_live_cancel_idx",
            ),
            # The parked runs a wake is waiting for (``wake_seq > parked_seq``):
            # few at any moment, looked for by every maintenance pass.
            models.Index(
                fields=["workflow_id"],
                condition=Q(status="parked", wake_seq__gt=F("parked_seq")),
                name="weft_run_woken_idx",
            ),
            models.Index(
                fields=["turn_retry_at"],
                condition=Q(turn_retry_at__isnull=False, status__in=LIVE_STATUSES),
                name="weft_run_live_retry_idx",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.workflow_id} ({self.name}, {self.status})"

    @property
    def is_terminal(self) -> bool:
        return self.status in TERMINAL_STATUSES


class JournalEntry(models.Model):
    """A recorded command result at a position of a run's journal."""

    run = models.ForeignKey(WorkflowRun, on_delete=models.CASCADE, related_name="journal")
    position = models.IntegerField(help_text="order in which events were recorded")
    kind = models.CharField(max_length=32)
    command = models.IntegerField(
        null=True, blank=True, help_text="the leaf command (n-th yielded) this event settles"
    )
    target = models.CharField(max_length=200, blank=True, default="")
    result = models.JSONField(null=True, blank=True)
    error = models.JSONField(null=True, blank=True)
    engine_id = models.CharField(max_length=200, blank=True, default="")
    epoch = models.BigIntegerField(default=0)
    at_ms = models.BigIntegerField(default=0)

    class Meta:
        ordering = ["run", "position"]
        constraints = [
            models.UniqueConstraint(fields=["run", "position"], name="weft_journal_run_position")
        ]

    def __str__(self) -> str:
        return f"{self.position}: {self.kind} {self.target}"


class Timer(models.Model):
    """A durable timer: a sleep, a wait timeout, a retry backoff, a deadline."""

    run = models.ForeignKey(WorkflowRun, on_delete=models.CASCADE, related_name="timers")
    position = models.IntegerField(null=True, blank=True, help_text="the command it belongs to")
    kind = models.CharField(max_length=32, choices=TimerKind.choices)
    fire_at = models.BigIntegerField(db_index=True)
    dispatched_at = models.BigIntegerField(null=True, blank=True)
    engine_id = models.CharField(max_length=200, blank=True, default="")
    epoch = models.BigIntegerField(default=0)
    payload = models.JSONField(default=dict, blank=True)

    objects = TimerQuerySet.as_manager()

    class Meta:
        ordering = ["fire_at"]

    def __str__(self) -> str:
        return f"{self.kind} at {self.fire_at}"


class SignalMessage(models.Model):
    """A signal buffered durably until the run consumes it."""

    run = models.ForeignKey(WorkflowRun, on_delete=models.CASCADE, related_name="signals")
    name = models.CharField(max_length=200)
    payload = models.JSONField(null=True, blank=True)
    consumed_at_position = models.IntegerField(null=True, blank=True)
    received_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]
        indexes = [
            models.Index(fields=["run", "name"], name="weft_signal_run_name_idx"),
            # A turn reads only the run's unconsumed signals: without this the
            # read scans every signal the run ever got (O(history) per step).
            models.Index(
                fields=["run", "id"],
                condition=models.Q(consumed_at_position__isnull=True),
                name="weft_signal_unconsumed_idx",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name} -> {self.run_id}"


class AsyncActivity(models.Model):
    """A single-use token handed to the outside world; stored hashed."""

    token_hash = models.CharField(max_length=64, primary_key=True)
    run = models.ForeignKey(WorkflowRun, on_delete=models.CASCADE, related_name="async_activities")
    position = models.IntegerField()
    target = models.CharField(max_length=200, blank=True, default="")
    status = models.CharField(
        max_length=16, choices=AsyncStatus.choices, default=AsyncStatus.PENDING
    )
    result = models.JSONField(null=True, blank=True)
    error = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    completed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name_plural = "async activities"

    def __str__(self) -> str:
        return f"{self.target or 'async'} ({self.status})"


class ActivityHeartbeat(models.Model):
    """The latest heartbeat of an activity command of a run: its progress.

    One row per ``(run, position)``, overwritten by each durable heartbeat
    of any attempt (``engine.heartbeats``), never read by replay: progress is
    for people (admin, API), not part of the workflow's history. Written
    under the claim fence but without touching ``WorkflowRun.version``, so a
    heartbeat never disturbs the turn's optimistic write; deleted with the
    run (cascade), so retention purges it too.
    """

    run = models.ForeignKey(WorkflowRun, on_delete=models.CASCADE, related_name="heartbeats")
    position = models.IntegerField(help_text="the activity command's journal position")
    attempt = models.IntegerField(help_text="1-based attempt that sent it")
    details = models.JSONField(null=True, blank=True)
    beat_at = models.BigIntegerField(help_text="engine clock, ms")
    engine_id = models.CharField(max_length=200, blank=True, default="")
    epoch = models.BigIntegerField(default=0)

    class Meta:
        ordering = ["run", "position"]
        constraints = [
            models.UniqueConstraint(fields=["run", "position"], name="weft_heartbeat_run_position")
        ]

    def __str__(self) -> str:
        return f"position {self.position}, attempt {self.attempt}"


class UpdateRequest(models.Model):
    """An accepted ``client.update`` waiting for the run's owner (``engine.updates``).

    Written by the client only after the validator passed (a rejected update
    leaves no row). One row per ``(run, update_id)``: a second call with the
    same id finds it (or its recorded answer) instead of applying twice. The
    owner consumes it in the fenced batch that journals the ``update`` event,
    like a signal; the answer is the ``update-done`` journal entry.
    """

    run = models.ForeignKey(WorkflowRun, on_delete=models.CASCADE, related_name="updates")
    update_id = models.CharField(max_length=200)
    name = models.CharField(max_length=200)
    args = models.JSONField(default=list, blank=True)
    consumed_at_position = models.IntegerField(null=True, blank=True)
    received_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(fields=["run", "update_id"], name="weft_update_run_update_id")
        ]
        indexes = [
            models.Index(
                fields=["run", "id"],
                condition=models.Q(consumed_at_position__isnull=True),
                name="weft_update_unconsumed_idx",
            )
        ]

    def __str__(self) -> str:
        return f"update {self.name} ({self.update_id}) -> {self.run_id}"


class QueueLock(models.Model):
    """One row per queue: admissions to a queue lock it first (``engine.queues``)."""

    name = models.CharField(max_length=100, primary_key=True)

    def __str__(self) -> str:
        return self.name


class QueueSlot(models.Model):
    """A slot of a queue, owned by one claim generation (``ownership.slots``).

    It counts only while the workflow's claim is still at ``epoch`` with a
    holder and the run still holds it (running, or parked when the queue
    says so; an activity slot until its attempt ends). So a takeover, a
    release, a rotation or the run's end frees it in the commit that makes
    that change: nothing has to delete it. Old rows stay for the rate
    window, then the next admission deletes them.
    """

    queue = models.CharField(max_length=100)
    workflow_id = models.CharField(max_length=200)
    epoch = models.BigIntegerField()
    run_id = models.UUIDField()
    concurrency_key = models.CharField(max_length=200, null=True, blank=True)
    #: ``None``: the run's slot; else the activity command's journal position.
    position = models.IntegerField(null=True, blank=True)
    admitted_at = models.BigIntegerField(help_text="engine clock, ms")
    released = models.BooleanField(default=False)
    counts_for_rate = models.BooleanField(default=True)

    class Meta:
        indexes = [
            models.Index(fields=["queue", "admitted_at"], name="weft_slot_queue_at_idx"),
            models.Index(fields=["workflow_id", "epoch"], name="weft_slot_wf_epoch_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.queue}: {self.workflow_id} @ epoch {self.epoch}"


# Published events and streams (issue #18): their own module, re-exported here.
from weft_django.models.published import (  # noqa: E402
    RunSearchAttribute,
    StreamEntry,
    WorkflowEvent,
)
from weft_django.models.routed import RoutedAttempt, RoutedStatus  # noqa: E402  (issue #16 part 3)
