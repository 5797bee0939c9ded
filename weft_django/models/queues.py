"""Flow control's rows: one lock row per queue (admission is serialised on it) and
one slot per admitted run generation.

Invariant: a slot belongs to a claim generation (``workflow_id``, ``epoch``); a
deposed owner's slot is released by the fenced batch that ends its generation.
"""

from __future__ import annotations

from django.db import models


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
    #: The run's fairness key (``engine.queues.fair``: when the key was last admitted).
    fairness_key = models.CharField(max_length=200, null=True, blank=True)
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
