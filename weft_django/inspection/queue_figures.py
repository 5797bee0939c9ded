"""Per-queue figures: waiting, running (slots held), admitted and rate-limited.

Invariant: ``weft_status`` (text and ``--json``), the Prometheus collector and
the admin's queue list show the same numbers, counted by the same rules
the admission uses (``ownership.slots``: a slot counts only while its claim
generation is current and its run holds it). The label set is closed: one
entry per queue ``WEFT["QUEUES"]`` declares, whatever the runs say.

Bounded: every count reads at most ``COUNT_CAP + 1`` rows (``db.counting``),
ONE statement per queue for the three plain counts and at most one more for
the rate-limited one, so a queue with a million waiting runs costs a scrape
no more than one with ten thousand (above the cap the figure is the
planner's estimate and is listed in ``estimated``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from weft_django.conf import get_settings
from weft_django.db.counting import COUNT_CAP, bounded_count, bounded_counts
from weft_django.kernel.queue_spec import QueueSpec
from weft_django.models import QueueSlot, WorkflowRun
from weft_django.ownership.slots import key_rate_usage, live_slots

#: The window ``admitted`` counts over for a queue without a rate.
DEFAULT_WINDOW_MS = 60_000
#: Concurrency keys at their ``per_key_rate`` read at most (the rest are not counted).
RATE_LIMITED_KEYS_LIMIT = 1_000


@dataclass(frozen=True)
class QueueFigures:
    """One declared queue at one moment."""

    name: str
    #: ``pending`` runs of the queue (not admitted yet).
    waiting: int
    #: Live slots (``ownership.slots.live_slots``): runs and activity attempts holding one.
    running: int
    #: Admissions inside the window (the queue's ``rate`` period, else a minute).
    admitted: int
    #: The window ``admitted`` counts over, in seconds.
    window_s: float
    #: The queue's ``rate`` count (``admitted``'s ceiling), ``None`` without a rate.
    admitted_limit: int | None
    #: The queue's ``concurrency`` (``running``'s ceiling), ``None`` without one.
    concurrency: int | None
    #: Waiting runs a rate holds back now: every waiting run when the queue's
    #: ``rate`` window is full, else those whose key is at its ``per_key_rate``.
    rate_limited: int
    #: The figures above their cap, given as the planner's estimate.
    estimated: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "waiting": self.waiting,
            "running": self.running,
            "admitted": self.admitted,
            "window_s": self.window_s,
            "admitted_limit": self.admitted_limit,
            "concurrency": self.concurrency,
            "rate_limited": self.rate_limited,
        }


def _window_ms(spec: QueueSpec) -> int:
    if spec.rate is not None:
        return spec.rate[1]
    if spec.per_key_rate is not None:
        return spec.per_key_rate[1]
    return DEFAULT_WINDOW_MS


def queue_figures_of(spec: QueueSpec, db: str, now_ms: int) -> QueueFigures:
    """The figures of one queue (see the module doc)."""
    window = _window_ms(spec)
    waiting_runs = WorkflowRun.objects.using(db).filter(queue=spec.name, status="pending")
    admitted_rows = QueueSlot.objects.using(db).filter(
        queue=spec.name, counts_for_rate=True, admitted_at__gt=now_ms - window
    )
    counted = bounded_counts(
        {"waiting": waiting_runs, "running": live_slots(spec, db), "admitted": admitted_rows},
    )
    estimated = [f"queues.{spec.name}.{k}" for k, c in counted.items() if not c.exact]
    waiting = counted["waiting"].value
    admitted = counted["admitted"].value
    rate_limited = 0
    if waiting and spec.rate is not None and admitted >= spec.rate[0]:
        rate_limited = waiting
    elif waiting and spec.per_key_rate is not None:
        usage = key_rate_usage(spec, db, now_ms)
        full = sorted(k for k, n in usage.items() if n >= spec.per_key_rate[0])
        if full:
            limited = bounded_count(
                waiting_runs.filter(concurrency_key__in=full[:RATE_LIMITED_KEYS_LIMIT]), COUNT_CAP
            )
            rate_limited = limited.value
            if not limited.exact:
                estimated.append(f"queues.{spec.name}.rate_limited")
    return QueueFigures(
        name=spec.name,
        waiting=waiting,
        running=counted["running"].value,
        admitted=admitted,
        window_s=window / 1000,
        admitted_limit=spec.rate[0] if spec.rate is not None else None,
        concurrency=spec.concurrency,
        rate_limited=rate_limited,
        estimated=tuple(estimated),
    )


def queue_cells(figures: QueueFigures) -> tuple[str, str, str, str]:
    """``(waiting, running, admitted, rate-limited)`` as text: running against the
    concurrency, admitted against the rate, inside its window."""
    running = str(figures.running)
    if figures.concurrency is not None:
        running += f"/{figures.concurrency}"
    admitted = str(figures.admitted)
    if figures.admitted_limit is not None:
        admitted += f"/{figures.admitted_limit}"
    admitted += f" in {figures.window_s:g}s"
    return str(figures.waiting), running, admitted, str(figures.rate_limited)


def queue_figures(now_ms: int, using: str | None = None) -> dict[str, QueueFigures]:
    """Declared queue name → its figures, in name order (``{}`` without queues)."""
    settings = get_settings()
    db = using or settings.database
    return {
        name: queue_figures_of(settings.queues[name], db, now_ms)
        for name in sorted(settings.queues)
    }


__all__ = [
    "DEFAULT_WINDOW_MS",
    "QueueFigures",
    "queue_cells",
    "queue_figures",
    "queue_figures_of",
]
