"""The Django admin for weft (SPEC §5 "Admin"): read-mostly inspection.

Why read-mostly: every row belongs to the fenced claim protocol or to a run
an engine may be driving right now, so nothing is added, changed or deleted
through a form (``base``); the only writes are the actions, and each goes
through ``weft_django.engine.client`` (cancel, suspend, resume, retry, force
release), which fences, rotates and notifies exactly as the API and the CLI
do. One module per resource: ``runs``, ``claims``, ``engines``,
``singletons``; ``timeline`` renders the journal and claim timelines.

Claim and heartbeat timestamps are engine-clock milliseconds; "expires in",
"alive" and "heartbeat age" judge them against this process's wall clock
with the read model's rules (``weft_django.querysets``,
``weft_django.inspection``): the judgement ``weft_status``, the API and the
Prometheus collector use.
"""

from __future__ import annotations

from .base import ReadOnlyAdmin, ReadOnlyInline, WeftDatabaseMixin
from .claims import ClaimStateFilter, HolderAdmin
from .engines import EngineAliveFilter, EngineRecordAdmin
from .runs import JournalEntryInline, TimerInline, WorkflowRunAdmin
from .schedules import ScheduleAdmin
from .singletons import ClaimEventAdmin, GlobalLeaseAdmin, OwnershipModeMarkerAdmin
from .timeline import TIMELINE_LIMIT

__all__ = [
    "TIMELINE_LIMIT",
    "ClaimEventAdmin",
    "ClaimStateFilter",
    "EngineAliveFilter",
    "EngineRecordAdmin",
    "GlobalLeaseAdmin",
    "HolderAdmin",
    "JournalEntryInline",
    "OwnershipModeMarkerAdmin",
    "ReadOnlyAdmin",
    "ReadOnlyInline",
    "ScheduleAdmin",
    "TimerInline",
    "WeftDatabaseMixin",
    "WorkflowRunAdmin",
]
