"""The history of a run's activity attempts: one row per attempt that ended.

The invariant: **a row is written only by the commit that records its
attempt's outcome** -- the result, the final error, the retry timer, or the
settlement of an attempt its engine's death cut short -- in that same fenced
batch (``engine.activities.attempts``), never by a write of its own. So a
deposed engine records no attempt, the history never claims an outcome the
journal does not hold, and recording it costs no commit. Never read by
replay: it is for people (the run page's timeline, the API, ``weft show``).
Deleted with its run (cascade), so purge and retention leave nothing behind.
"""

from __future__ import annotations

from django.db import models

from weft_django.models.fields import PayloadField
from weft_django.models.runs import WorkflowRun


class AttemptOutcome(models.TextChoices):
    """How an attempt ended."""

    # Its value was recorded.
    OK = "ok", "ok"
    # It raised or timed out (retried or not).
    FAILED = "failed", "failed"
    # Its engine stopped while it ran; the next owner settled it as failed.
    INTERRUPTED = "interrupted", "interrupted"


class ActivityAttempt(models.Model):
    """One ended attempt of the activity command at ``position`` of a run."""

    run = models.ForeignKey(WorkflowRun, on_delete=models.CASCADE, related_name="attempts")
    position = models.IntegerField(help_text="the activity command's position")
    attempt = models.IntegerField(help_text="1-based attempt number")
    activity = models.CharField(max_length=200)
    started_at = models.BigIntegerField(help_text="engine clock, ms")
    ended_at = models.BigIntegerField(
        help_text="engine clock, ms (interrupted: when the next owner settled it)"
    )
    outcome = models.CharField(max_length=16, choices=AttemptOutcome.choices)
    #: Its headline (``None``: it succeeded). Exception text may quote the
    #: data it failed on, so it passes the payload codecs like every payload.
    error = PayloadField(null=True, blank=True, help_text="its headline")
    engine_id = models.CharField(max_length=200, blank=True, default="")
    epoch = models.BigIntegerField(default=0)

    class Meta:
        ordering = ["run", "started_at", "id"]
        indexes = [models.Index(fields=["run", "started_at"], name="weft_attempt_run_started_idx")]

    def __str__(self) -> str:
        return f"{self.activity} attempt {self.attempt} ({self.outcome})"


__all__ = ["ActivityAttempt", "AttemptOutcome"]
