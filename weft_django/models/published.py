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

from weft_django.models.fields import PayloadField


class WorkflowEvent(models.Model):
    """The last value a run set for an event ``key`` (``ctx.set_event``)."""

    run = models.ForeignKey("weft.WorkflowRun", on_delete=models.CASCADE, related_name="events")
    key = models.CharField(max_length=100)
    value = PayloadField(null=True, blank=True)
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
    value = PayloadField(null=True, blank=True)
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


class RunSearchAttribute(models.Model):
    """The current value of a run's search attribute ``name`` (``ctx.upsert_search_attributes``).

    Typed columns, one per declared type (``search_attribute_types``), and
    one index per ``(name, column)``: a filter ``customer=acme`` or
    ``amount>=100`` is an index range scan on PostgreSQL and SQLite alike,
    with the database comparing values of the right type (a JSON column
    would need a per-backend expression index for each attribute, and would
    compare ``"9" > "10"`` as text). Only the column of the attribute's type
    is set. Like events, a row mirrors a journal entry and is written only by
    the fenced batch that records it; ``continue_as_new`` copies the rows to
    the new run in its own batch.
    """

    run = models.ForeignKey(
        "weft.WorkflowRun", on_delete=models.CASCADE, related_name="search_attributes"
    )
    name = models.CharField(max_length=64)
    type = models.CharField(max_length=8)
    str_value = models.CharField(max_length=255, null=True, blank=True)
    int_value = models.BigIntegerField(null=True, blank=True)
    float_value = models.FloatField(null=True, blank=True)
    bool_value = models.BooleanField(null=True, blank=True)
    datetime_value = models.DateTimeField(null=True, blank=True)
    position = models.IntegerField(help_text="journal position of the upsert that wrote it")
    set_at = models.BigIntegerField(default=0, help_text="engine clock, ms")

    class Meta:
        app_label = "weft"
        ordering = ["run", "name"]
        constraints = [models.UniqueConstraint(fields=["run", "name"], name="weft_attr_run_name")]
        indexes = [
            models.Index(fields=["name", "str_value"], name="weft_attr_str_idx"),
            models.Index(fields=["name", "int_value"], name="weft_attr_int_idx"),
            models.Index(fields=["name", "float_value"], name="weft_attr_float_idx"),
            models.Index(fields=["name", "bool_value"], name="weft_attr_bool_idx"),
            models.Index(fields=["name", "datetime_value"], name="weft_attr_datetime_idx"),
        ]

    @property
    def value(self) -> object:
        """The value in the column of its type."""
        return getattr(self, f"{self.type}_value", None)

    def __str__(self) -> str:
        return f"{self.name} = {self.value!r}"


__all__ = ["RunSearchAttribute", "StreamEntry", "WorkflowEvent"]
