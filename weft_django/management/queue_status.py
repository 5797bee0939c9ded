"""The queue lines of ``weft_status``, kept out of the command module."""

from __future__ import annotations

from collections.abc import Callable

from weft_django.inspection.queue_figures import queue_cells
from weft_django.inspection.status import ClusterStatus


def print_queues(out: Callable[[str], None], status: ClusterStatus) -> None:
    """One table row per declared queue (nothing when no queue is declared)."""
    if not status.queues:
        return
    out(f"queues: {len(status.queues)} declared")
    rows = [("QUEUE", "WAITING", "RUNNING", "ADMITTED", "RATE-LIMITED")]
    rows += [(name, *queue_cells(figures)) for name, figures in status.queues.items()]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        cells = (cell.ljust(w) for cell, w in zip(row, widths, strict=True))
        out(("  " + "  ".join(cells)).rstrip())


__all__ = ["print_queues"]
