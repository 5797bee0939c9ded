"""The ``Schedule`` row: a schedule's spec and its tick counters.

Why a row of its own and not only the driver workflow's journal: the
admin, the API and ``describe_schedule`` must read a schedule without
replaying anything, and ``WEFT["SCHEDULES"]`` must be compared with what is
stored. Who writes what (the invariant protected):

- the spec columns (``workflow`` ... ``paused``, ``version``, ``since_ms``)
  are written by client calls only (``client.create_schedule`` and friends,
  the boot-time sync), like ``client.start`` writes a run;
- the tick columns (``last_tick_ms``, ``next_fire_ms``, ``*_count``) are
  written by the schedule's driver workflow **inside its fenced atomic
  step** (``engine.schedules.ticking``): a deposed engine's step rolls back
  with its fence, so a tick is counted once. Counters are ``F()``
  increments, so the client's ``triggered``/``backfilled`` counts never lose
  an update against the driver's.

Times are integer ms of the engine clock, as everywhere in weft.
"""

from __future__ import annotations

from django.db import models

from weft_django.models.fields import PayloadField


class Schedule(models.Model):
    schedule_id = models.CharField(max_length=160, primary_key=True)
    workflow = models.CharField(max_length=200)
    input = PayloadField(null=True, blank=True)
    cron = models.CharField(max_length=200, null=True, blank=True)
    every_ms = models.BigIntegerField(null=True, blank=True)
    timezone = models.CharField(max_length=64, default="UTC")
    overlap = models.CharField(max_length=20, default="skip")
    catchup_window_ms = models.BigIntegerField(default=600_000)
    jitter_ms = models.BigIntegerField(null=True, blank=True)
    start_at_ms = models.BigIntegerField(null=True, blank=True)
    end_at_ms = models.BigIntegerField(null=True, blank=True)
    paused = models.BooleanField(default=False)
    # Declared in WEFT["SCHEDULES"]: the normalised declaration last applied.
    declared = models.BooleanField(default=False)
    declared_spec = models.JSONField(null=True, blank=True)
    version = models.PositiveIntegerField(default=1)
    # Ticks at or before this instant are never fired by the driver (set at
    # creation and on resume: a paused stretch is not caught up).
    since_ms = models.BigIntegerField()
    created_at_ms = models.BigIntegerField()
    updated_at_ms = models.BigIntegerField()
    # Written by the driver's fenced step.
    last_tick_ms = models.BigIntegerField(null=True, blank=True)
    next_fire_ms = models.BigIntegerField(null=True, blank=True)
    fired_count = models.BigIntegerField(default=0)
    skipped_count = models.BigIntegerField(default=0)
    buffered_count = models.BigIntegerField(default=0)
    missed_count = models.BigIntegerField(default=0)
    triggered_count = models.BigIntegerField(default=0)
    backfilled_count = models.BigIntegerField(default=0)
    failed_count = models.BigIntegerField(default=0)

    class Meta:
        app_label = "weft"
        ordering = ("schedule_id",)

    def __str__(self) -> str:
        return self.schedule_id


__all__ = ["Schedule"]
