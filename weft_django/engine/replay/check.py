"""Replay live runs against the code in this process: the deploy gate.

Why it can exist: the journal lives in the application's own database and
``Replay(record=False)`` needs no owner (``client.query`` uses the same path),
so any process that imports the code about to be deployed can replay every
live run read-only and see where that code and a journal disagree -- before
an engine does, and suspends the run (``Diverged``).

Invariants:

* **Nothing is written.** Rows are only read (runs, then their journals);
  each body runs with database access refused (``sandbox``), activities are
  never called (a replay only reads their recorded results), and no event is
  recorded (``record=False``). A check is safe against production at any time.
* **Bounded memory.** Runs are read in chunks by primary key (keyset, no
  offset), each chunk's journal in one ordered query streamed run by run; a
  finding keeps strings, never a replay. Memory is one chunk of run rows plus
  one run's journal, whatever the table holds.
* **A finding is certain.** Only what breaks the run under the new code is
  reported: a ``NonDeterminismError`` from the replay, a body that stops
  (raises, continues as new) while recorded events are still unapplied (the
  old code got further than the new one can), a workflow name no
  ``@workflow`` registers, and a replay that raises out of a handler. A body
  that fails or finishes at the frontier is not a finding: the live run would
  do the same with the old code on its next turn.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from django.db.models import Count

from weft_django.conf import get_settings
from weft_django.engine.replay.events import Event, EventKind
from weft_django.engine.replay.history import history_events, load_history
from weft_django.engine.replay.offline import divergence, replay_journal
from weft_django.engine.workflow.definitions import get_workflow, has_workflow
from weft_django.models import LIVE_STATUSES, JournalEntry, WorkflowRun

FindingKind = Literal["non-determinism", "unknown-workflow", "replay-error"]

#: Runs read (and journals loaded) per query: large enough that a chunk's two
#: queries cost little per run, small enough that a chunk of long journals fits.
CHUNK_SIZE = 200


@dataclass(frozen=True)
class Finding:
    """One reason a run (or a workflow name) would break under this code."""

    kind: FindingKind
    workflow: str
    message: str
    run_id: str | None = None
    workflow_id: str | None = None
    status: str | None = None
    position: int | None = None
    recorded: str | None = None
    new: str | None = None
    #: ``unknown-workflow``: how many live runs carry the name.
    runs: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return {key: value for key, value in asdict(self).items() if value is not None}


@dataclass
class ReplayReport:
    """What a check found: ``checked`` runs replayed, ``skipped`` live runs left
    out by a limit, one ``Finding`` per broken run or unknown name."""

    checked: int = 0
    skipped: int = 0
    failures: list[Finding] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.failures

    def as_dict(self) -> dict[str, Any]:
        return {
            "checked": self.checked,
            "skipped": self.skipped,
            "failures": [finding.as_dict() for finding in self.failures],
        }


def live_runs(workflow: str | None = None) -> Any:
    """The runs a deploy can break: every live status (a pending run may be a
    resumed or retried one with a journal)."""
    runs = WorkflowRun.objects.using(get_settings().database).filter(status__in=LIVE_STATUSES)
    return runs.filter(name=workflow) if workflow is not None else runs


def check_live_runs(
    *, workflow: str | None = None, limit: int | None = None, chunk_size: int = CHUNK_SIZE
) -> ReplayReport:
    """Replay up to ``limit`` live runs (of ``workflow``, or all) against this code.

    Runs of names this process does not register are one ``unknown-workflow``
    finding per name, not replayed. Which runs a limit keeps: the first by
    primary key (a random UUID), so a limited check is a uniform sample.
    """
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
        raise ValueError(f"limit must be a non-negative integer or None, got {limit!r}")
    report = ReplayReport()
    runs = live_runs(workflow)
    known = _report_unknown(runs, report)
    selected = runs.filter(name__in=known)
    for finding in replay_runs(selected, limit=limit, chunk_size=chunk_size):
        report.checked += 1
        if finding is not None:
            report.failures.append(finding)
    if limit is not None:
        report.skipped = max(0, selected.count() - report.checked)
    return report


def sample_live_runs(sample: int, *, chunk_size: int = CHUNK_SIZE) -> ReplayReport:
    """Replay about ``sample`` live runs spread over every live workflow name.

    Why spread: a uniform sample of a store where one workflow has 10,000 live
    runs and another 3 would miss the small one; here every name gets
    ``sample // names`` runs (at least one), so each workflow type is replayed.
    """
    report = ReplayReport()
    runs = live_runs()
    known = _report_unknown(runs, report)
    if not known:
        return report
    each = max(1, sample // len(known))
    for name in known:
        for finding in replay_runs(runs.filter(name=name), limit=each, chunk_size=chunk_size):
            report.checked += 1
            if finding is not None:
                report.failures.append(finding)
    return report


def replay_runs(
    runs: Any, *, limit: int | None = None, chunk_size: int = CHUNK_SIZE
) -> Iterator[Finding | None]:
    """Replay each run of the queryset ``runs`` (any status) in primary-key
    chunks; yields its finding, or ``None`` for a run that replays cleanly."""
    db = get_settings().database
    after: Any = None
    left = limit
    while left is None or left > 0:
        size = chunk_size if left is None else min(chunk_size, left)
        query = runs.using(db).order_by("pk")
        if after is not None:
            query = query.filter(pk__gt=after)
        chunk = list(query.values_list("pk", "workflow_id", "name", "status", "input")[:size])
        if not chunk:
            return
        after = chunk[-1][0]
        if left is not None:
            left -= len(chunk)
        journals = _journals(db, [row[0] for row in chunk])
        for pk, workflow_id, name, status, input in chunk:
            events = journals.take(pk)
            yield replay_one(str(pk), workflow_id, name, status, input, events)
        journals.finish()
        if len(chunk) < size:
            return


class _Journals:
    """One chunk's journals from one query ordered like the chunk (by run pk),
    handed out run by run: only the current run's events are held."""

    def __init__(self, rows: Iterator[tuple[Any, ...]]) -> None:
        self._groups = itertools.groupby(rows, key=lambda row: row[0])
        self._next: tuple[Any, Iterator[tuple[Any, ...]]] | None = next(self._groups, None)

    def take(self, run_id: Any) -> list[Event]:
        """The events of ``run_id`` (asked in pk order); ``[]`` for a run with none."""
        if self._next is None or self._next[0] != run_id:
            return []
        rows = self._next[1]
        events = [Event(p, _kind(k), c, t, r, e) for _, p, k, c, t, r, e in rows]
        self._next = next(self._groups, None)
        return events

    def finish(self) -> None:
        """Every group was taken: the database ordered the journal like the runs
        (if it did not, a run would have replayed with an empty journal)."""
        if self._next is not None:
            raise RuntimeError(f"journal rows of run {self._next[0]} came out of primary-key order")


def _journals(db: str, run_ids: list[Any]) -> _Journals:
    rows = (
        JournalEntry.objects.using(db)
        .filter(run_id__in=run_ids)
        .order_by("run_id", "position")
        .values_list("run_id", "position", "kind", "command", "target", "result", "error")
    )
    return _Journals(rows.iterator(chunk_size=2000))


def _kind(kind: str) -> EventKind:
    return kind  # type: ignore[return-value]  # the engine stores only EventKind values


def replay_one(
    run_id: str, workflow_id: str, name: str, status: str, input: Any, events: Iterable[Event]
) -> Finding | None:
    """Replay one run read-only; its finding, or ``None`` if this code replays it."""
    if not has_workflow(name):
        return _unknown(name, 1, run_id=run_id, workflow_id=workflow_id, status=status)
    where: dict[str, Any] = {"run_id": run_id, "workflow_id": workflow_id, "status": status}
    try:
        replayed = replay_journal(
            get_workflow(name), workflow_id=workflow_id, run_id=run_id, input=input, events=events
        )
    except Exception as exc:  # a signal or update handler raised on replay
        return Finding(
            "replay-error",
            name,
            f"replay of {workflow_id!r} raised {type(exc).__name__}: {exc}",
            **where,
        )
    error = divergence(*replayed)
    if error is None:
        return None
    return Finding(
        "non-determinism",
        name,
        str(error),
        position=error.position,
        recorded=error.recorded,
        new=error.new,
        **where,
    )


def check_histories(sources: Iterable[Any]) -> ReplayReport:
    """Replay exported histories (paths or dicts) against this code: the gate
    for a run taken out of production (``docs/howto/histories.md``).

    Every source is loaded and verified first (``HistoryFormatError`` naming
    the first bad one, nothing replayed); then each is one checked run, its
    finding carrying the history's run and workflow ids. A history of a
    workflow name this code does not register is an ``unknown-workflow``
    finding.
    """
    documents = [load_history(source) for source in sources]
    report = ReplayReport()
    for document in documents:
        run = document["run"]
        name = document["workflow"]["name"]
        report.checked += 1
        finding = replay_one(
            str(run["run_id"]),
            str(run["workflow_id"]),
            name,
            str(run["status"]),
            run["input"],
            history_events(document),
        )
        if finding is not None:
            report.failures.append(finding)
    return report


def _report_unknown(runs: Any, report: ReplayReport) -> list[str]:
    """Add one ``unknown-workflow`` finding per name of ``runs`` no ``@workflow``
    registers (one grouped query); the registered names, sorted."""
    counts = dict(runs.order_by().values_list("name").annotate(n=Count("pk")))
    for name in sorted(name for name in counts if not has_workflow(name)):
        report.failures.append(_unknown(name, counts[name]))
    return sorted(name for name in counts if has_workflow(name))


def _unknown(name: str, runs: int, **where: Any) -> Finding:
    return Finding(
        "unknown-workflow",
        name,
        f"{runs} live run(s) of workflow {name!r}, which no @workflow in this code registers "
        "(renamed or removed while runs are live)",
        runs=runs,
        **where,
    )


__all__ = [
    "CHUNK_SIZE",
    "Finding",
    "FindingKind",
    "ReplayReport",
    "check_histories",
    "check_live_runs",
    "live_runs",
    "replay_one",
    "replay_runs",
    "sample_live_runs",
]
