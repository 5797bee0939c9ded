"""What a workflow publishes to the outside world while it runs: events and streams.

Invariant: these rows are a *projection of the journal*. A row is written
only by the turn's fenced batch that records the journal entry it mirrors
(``engine.published.rows_for``), so a deposed engine can never leave a row
the journal does not have, and a replay -- which re-reads the journal and
records nothing new for what it replays -- never writes one twice. Readers
(``client.get_event``, ``client.read_stream``, the API) read these rows,
never the journal, so a wait costs one indexed read and not a scan of the
run's history. Deleted with the run (cascade), so retention purges them too.
"""

from __future__ import annotations

from django.db import models


class WorkflowEvent(models.Model):
    """The last value a run set for an event ``key`` (``ctx.set_event``)."""

    run = models.ForeignKey("weft.WorkflowRun", on_delete=models.CASCADE, related_name="events")
    key = models.CharField(max_length=100)
    value = models.JSONField(null=True, blank=True)
    position = models.IntegerField(help_text="journal position of the set that wrote it")
    set_at = models.BigIntegerField(default=0, help_text="engine clock, ms")

    class Meta:
        app_label = "weft"
        ordering = ["run", "key"]
        constraints = [models.UniqueConstraint(fields=["run", "key"], name="weft_event_run_key")]

    def __str__(self) -> str:
        return f"{self.key} = {self.value!r}"


class StreamEntry(models.Model):
    """One value of a run's stream ``key`` at ``offset`` (0, 1, 2, ...), or its close."""

    run = models.ForeignKey("weft.WorkflowRun", on_delete=models.CASCADE, related_name="streams")
    key = models.CharField(max_length=100)
    offset = models.IntegerField()
    value = models.JSONField(null=True, blank=True)
    closed = models.BooleanField(default=False, help_text="the close marker (no value)")
    position = models.IntegerField(help_text="journal position of the write")
    written_at = models.BigIntegerField(default=0, help_text="engine clock, ms")

    class Meta:
        app_label = "weft"
        ordering = ["run", "key", "offset"]
        constraints = [
            models.UniqueConstraint(
                fields=["run", "key", "offset"], name="weft_stream_run_key_offset"
            )
        ]

    def __str__(self) -> str:
        return f"{self.key}[{self.offset}]" + (" closed" if self.closed else "")


__all__ = ["StreamEntry", "WorkflowEvent"]
