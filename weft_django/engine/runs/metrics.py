"""Recording run ends and activity attempts by type name.

The engine knows which names its process registered, so a label value is chosen here and
nowhere else -- a registered workflow or activity name, else ``"other"`` -- and the
ownership layer's recorder never sees a run id or user input. A run that ends in a turn is
counted on its engine's ``ClaimMetrics`` (published at heartbeat); a run an operator stops
(``engine.operations.stop``, in whatever process) is added to the durable totals right
after the stop commits. Each run ends once, through one of the two, so it is counted once.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from django.utils import timezone

from weft_django.engine.workflow.definitions import registry
from weft_django.inspection.totals import add_to_totals
from weft_django.kernel.clock import wall_ms
from weft_django.metrics.business import (
    OTHER,
    WORKFLOW_END_STATUSES,
    BusinessMetrics,
    valid_type_name,
)
from weft_django.ownership.metrics import ClaimMetrics, ClaimMetricsSnapshot

__all__ = [
    "activity_label",
    "attempt_outcome",
    "record_attempt",
    "record_run_end",
    "record_stops",
    "workflow_label",
]


def workflow_label(name: str) -> str:
    """``name`` if this process registered that workflow, else ``"other"``."""
    return name if name in registry.workflows and valid_type_name(name) else OTHER


def activity_label(name: str) -> str:
    """``name`` if this process registered that activity, else ``"other"``."""
    return name if name in registry.activities and valid_type_name(name) else OTHER


def _age_s(created_at: datetime | None) -> float:
    if created_at is None:
        return 0.0
    return max(0.0, (timezone.now() - created_at).total_seconds())


def record_run_end(
    metrics: ClaimMetrics | BusinessMetrics, name: str, status: str, created_at: datetime | None
) -> None:
    """Count one run that ended ``status`` (not ``suspended``: it has not ended)."""
    if status not in WORKFLOW_END_STATUSES:
        return
    recorder = metrics.business if isinstance(metrics, ClaimMetrics) else metrics
    recorder.record_workflow_finished(workflow_label(name), status, _age_s(created_at))


def record_stops(db: str, runs: Iterable[tuple[str, str, datetime | None]]) -> None:
    """Add runs an operator's stop ended, ``(name, status, created_at)`` each,
    to the durable totals (one write for the whole stop, cascade included)."""
    recorder = BusinessMetrics()
    for name, status, created_at in runs:
        record_run_end(recorder, name, status, created_at)
    add_to_totals(db, ClaimMetricsSnapshot(business=recorder.snapshot()), now_ms=wall_ms())


def attempt_outcome(ok: bool, timed_out: bool) -> str:
    """The ``outcome`` label of an ended attempt: completed, timed_out or failed."""
    return "completed" if ok else ("timed_out" if timed_out else "failed")


def record_attempt(metrics: ClaimMetrics, name: str, outcome: str, seconds: float) -> None:
    """Count one activity attempt of ``name`` that ended ``outcome`` after ``seconds``."""
    metrics.business.record_activity_attempt(activity_label(name), outcome, max(0.0, seconds))
