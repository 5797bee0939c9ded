"""What an engine says about itself: its liveness record and the folded totals of
the records retention deleted (so cluster counters never go backwards).
"""

from __future__ import annotations

from django.db import models

from weft_django.models.querysets import (
    EngineRecordQuerySet,
)


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
    #: The queues this engine admits runs of (``weft_worker --queues``); ``None``: all.
    queues = models.JSONField(null=True, blank=True)
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
