"""A run and everything its history is made of: journal, timers, buffered signals,
async activities, heartbeats and accepted updates.

Invariant: every row here is written by its run's owner through the fenced batch, or
by an external transition conditioned on the claim; deleting a run cascades to all
of them, so retention and purge never leave a partial history.
"""

from __future__ import annotations

import uuid

from django.db import models
from django.db.models import F, Q

from weft_django.models.choices import (
    LIVE_STATUSES,
    TERMINAL_STATUSES,
    AsyncStatus,
    RunStatus,
    TimerKind,
)
from weft_django.models.fields import PayloadField
from weft_django.models.querysets import (
    TimerQuerySet,
    WorkflowRunQuerySet,
)


class WorkflowRun(models.Model):
    """One generation (run) of a workflow id."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    workflow_id = models.CharField(max_length=200, db_index=True)
    name = models.CharField(max_length=200)
    status = models.CharField(
        max_length=16, choices=RunStatus.choices, default=RunStatus.PENDING, db_index=True
    )
    input = PayloadField(null=True, blank=True)
    result = PayloadField(null=True, blank=True)
    error = PayloadField(null=True, blank=True)
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
    # Turns in a row ended by the death of their engine (``engine.turn.failures``,
    # crash-loop containment): ``{"count", "engines", "position"}``, ``None`` when
    # none. Cleared by the commit that records the run's next journal entry and
    # by resume; at ``WEFT["MAX_RECOVERY_ATTEMPTS"]`` the run is suspended.
    recoveries = models.JSONField(null=True, blank=True)
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
    # A ``fair`` queue's round robin (``engine.queues.fair``): the key
    # (default: the concurrency key) and its admissions per round.
    fairness_key = models.CharField(max_length=200, null=True, blank=True)
    fairness_weight = models.IntegerField(default=1)
    # Tracing (the ``otel`` extra): the W3C carrier (``traceparent``,
    # ``tracestate``) of the span that started the run, so an engine or a Celery
    # node on another machine continues the caller's trace. Ids only, never data.
    trace_context = models.JSONField(null=True, blank=True)

    objects = WorkflowRunQuerySet.as_manager()

    class Meta:
        verbose_name = "workflow run"
        ordering = ["-created_at"]
        # ``weft.view_payload`` (app label ``weft``): who sees decoded payloads.
        permissions = [("view_payload", "Can view decoded workflow payloads")]
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
    result = PayloadField(null=True, blank=True)
    error = PayloadField(null=True, blank=True)
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
        return f"{self.kind} timer (position {self.position})"  # its time: the admin's column


class SignalMessage(models.Model):
    """A signal buffered durably until the run consumes it."""

    run = models.ForeignKey(WorkflowRun, on_delete=models.CASCADE, related_name="signals")
    name = models.CharField(max_length=200)
    payload = PayloadField(null=True, blank=True)
    consumed_at_position = models.IntegerField(null=True, blank=True)
    received_at = models.DateTimeField(auto_now_add=True)
    # ``client.signal(..., idempotency_key=)``: one signal per key per workflow id
    # (the constraint below), however often a caller retries.
    workflow_id = models.CharField(max_length=200, null=True, blank=True)
    idempotency_key = models.CharField(max_length=255, null=True, blank=True)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(
                fields=["workflow_id", "idempotency_key"],
                condition=models.Q(idempotency_key__isnull=False),
                name="weft_signal_idempotency",
            )
        ]
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
    result = PayloadField(null=True, blank=True)
    error = PayloadField(null=True, blank=True)
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
    details = PayloadField(null=True, blank=True)
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
    args = PayloadField(default=list, blank=True)
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
