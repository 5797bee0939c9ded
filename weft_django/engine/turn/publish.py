"""The rows of published values, written by the turn's own fenced batch.

Invariant: an event or stream row exists only if the journal entry it
mirrors was committed -- they are written by the same conditional batch
(``TurnState.commit`` adds ``rows_for``), under the same claim fence, so a
deposed engine's write lands as a whole or not at all, and the next owner,
which replays the entry, writes nothing for it (``engine.publish``).

Latency: a body that publishes and then starts a long activity would keep
its value in memory until the activity's result is committed. At the
frontier the turn therefore commits pending published values first
(``flush``: one fenced batch more, only for steps that published).

Waiters (``engine.published_reads``) are told on commit through the same
announcement a run's end uses (``Wake("finished", run)``: on PostgreSQL a
``NOTIFY weft_done``): a ``result()`` waiter woken by it re-reads the run,
sees it still running and waits again, so no new channel and no transport
change is needed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from weft_django.engine.replay.events import Event
from weft_django.engine.replay.machine import Replay
from weft_django.engine.wakes import Wake, announce
from weft_django.engine.workflow.publish import PUBLISH_KINDS
from weft_django.kernel.attribute_types import COLUMNS, from_json
from weft_django.models import RunSearchAttribute, StreamEntry, WorkflowEvent, WorkflowRun
from weft_django.ownership.ops import BulkInsert, Call, Delete, Insert, Write


class _Turn(Protocol):
    """What ``flush`` needs of ``TurnState`` (which imports this module)."""

    replay: Replay | None

    def commit(self, writes: Sequence[Write]) -> Any: ...


def rows_for(run: WorkflowRun, recorded: Sequence[Event], at_ms: int) -> list[Write]:
    """The published rows of ``recorded`` (journal entries about to be committed)."""
    events: dict[str, Event] = {}
    streams: list[StreamEntry] = []
    attributes: dict[str, tuple[str, Any, int]] = {}
    for event in recorded:
        if event.kind == "search-attributes":
            values = event.result if isinstance(event.result, dict) else {}
            for name, (kind, value) in values.items():
                attributes[name] = (kind, value, event.position)  # the last upsert wins
        elif event.kind == "set-event":
            events[event.target] = event  # last value wins, also within one batch
        elif event.kind in ("stream-write", "stream-close"):
            result: dict[str, Any] = event.result if isinstance(event.result, dict) else {}
            streams.append(
                StreamEntry(
                    run_id=run.pk,
                    key=event.target,
                    offset=int(result.get("offset", 0)),
                    value=result.get("value"),
                    closed=event.kind == "stream-close",
                    position=event.position,
                    written_at=at_ms,
                )
            )
    if not events and not streams and not attributes:
        return []
    writes: list[Write] = attribute_writes(run.pk, attributes, at_ms)
    for key, event in events.items():
        writes.append(Delete(WorkflowEvent, {"run_id": run.pk, "key": key}))
        writes.append(
            Insert(
                WorkflowEvent(
                    run_id=run.pk,
                    key=key,
                    value=event.result,
                    position=event.position,
                    set_at=at_ms,
                )
            )
        )
    if streams:
        writes.append(BulkInsert(streams))
    wake = Wake("finished", str(run.pk), "", run.workflow_id)
    # Inside the batch's transaction: delivered on its commit, dropped on rollback.
    writes.append(
        Call(lambda using: announce(Wake(wake.event, wake.run_id, using, wake.workflow_id)))
    )
    return writes


def attribute_writes(
    run_id: Any, attributes: dict[str, tuple[str, Any, int]], at_ms: int
) -> list[Write]:
    """Replace the rows of the upserted names: one ``DELETE``, one ``INSERT``."""
    if not attributes:
        return []
    rows = [
        RunSearchAttribute(
            run_id=run_id,
            name=name,
            type=kind,
            position=position,
            set_at=at_ms,
            **{COLUMNS[kind]: from_json(kind, value)},
        )
        for name, (kind, value, position) in attributes.items()
        if value is not None and kind in COLUMNS
    ]
    writes: list[Write] = [
        Delete(RunSearchAttribute, {"run_id": run_id, "name__in": sorted(attributes)})
    ]
    if rows:
        writes.append(BulkInsert(rows))
    return writes


@dataclass(frozen=True)
class CarrySearchAttributes:
    """``continue_as_new``: the new run starts with the old run's attributes
    (as Temporal's continue-as-new keeps them), copied in the batch that
    ends the old run and inserts the new one."""

    source: Any
    target: Any

    def apply(self, using: str) -> None:
        rows = list(RunSearchAttribute.objects.using(using).filter(run_id=self.source))
        for row in rows:
            row.pk = None
            row.run_id = self.target
        if rows:
            RunSearchAttribute.objects.using(using).bulk_create(rows)


def flush(turn: _Turn) -> bool:
    """At the frontier: commit values the body published since the last commit
    (so a reader sees them before the next command finishes); ``True`` if it did."""
    replay = turn.replay
    if replay is None or not any(e.kind in PUBLISH_KINDS for e in replay.new_events):
        return False
    turn.commit([])
    return True


__all__ = ["CarrySearchAttributes", "attribute_writes", "flush", "rows_for"]
