"""The row of one routed activity attempt (``@activity(celery_queue=...)``).

Why a row per attempt: the attempt runs on a Celery worker that holds no
claim, so its result cannot be journaled by that worker. Instead the worker
answers through a single-use token whose hash is this row's key, and the
answer is accepted only while (1) the row is still ``pending``, (2) the
run is not finished (a cancelled run's late result is discarded) and (3)
the workflow's claim is still at the epoch that sent the attempt (a result
sent under an old owner, or before a rotation -- cancel, suspend, timeout --
is discarded). The owning engine then journals it through its own fenced
turn commit. Deleted with the run (cascade), so retention purges it too.

Registered by an import at the end of ``weft_django.models``; the foreign
key is by name so this module imports no other model module.
"""

from __future__ import annotations

from django.db import models

from weft_django.models.fields import PayloadField


class RoutedStatus(models.TextChoices):
    """The single-use state of a routed attempt's token."""

    # Sent to the queue; no answer yet.
    PENDING = "pending", "pending"
    # Answered with the activity's value.
    COMPLETED = "completed", "completed"
    # Answered with the activity's exception.
    FAILED = "failed", "failed"
    # Superseded (a newer attempt of the same command) or abandoned: no answer is accepted.
    EXPIRED = "expired", "expired"


class RoutedAttempt(models.Model):
    """One attempt of a routed activity, sent as a Celery task; keyed by its token's hash."""

    token_hash = models.CharField(max_length=64, primary_key=True)
    run = models.ForeignKey(
        "weft.WorkflowRun", on_delete=models.CASCADE, related_name="routed_attempts"
    )
    position = models.IntegerField(help_text="the activity command's journal position")
    attempt = models.IntegerField(help_text="1-based attempt number")
    epoch = models.BigIntegerField(help_text="claim epoch of the engine that sent it")
    activity = models.CharField(max_length=200)
    queue = models.CharField(max_length=200)
    status = models.CharField(
        max_length=16, choices=RoutedStatus.choices, default=RoutedStatus.PENDING
    )
    result = PayloadField(null=True, blank=True)
    error = PayloadField(null=True, blank=True)
    worker = models.CharField(max_length=200, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    completed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        app_label = "weft"
        indexes = [models.Index(fields=["run", "position"], name="weft_routed_run_pos_idx")]

    def __str__(self) -> str:
        return f"{self.activity} attempt {self.attempt} on {self.queue} ({self.status})"


__all__ = ["RoutedAttempt", "RoutedStatus"]
