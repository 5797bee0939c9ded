"""The Django admin for weft (SPEC §5 "Admin"): read-mostly inspection.

Why read-mostly: every row belongs to the fenced claim protocol or to a run
an engine may be driving right now, so nothing is added, changed or deleted
through a form (``base``); the only writes are the actions, and each goes
through ``weft_django.client`` (cancel, suspend, resume, retry, force
release, settling an async activity), which fences, rotates and notifies
exactly as the API and the CLI do. Each action says what it did in one
summary message and leaves a ``LogEntry`` per object (``reporting``); the
changelists an action works from search by exact id (``search``). One
module per resource: ``claims``, ``engines``, ``singletons``, ``schedules``,
``signals``, ``async_activities``, ``attempts``, ``queues``, and the ``runs`` package for the run
changelist and page; ``timeline`` renders the journal and claim timelines.

Claim and heartbeat timestamps are engine-clock milliseconds; "expires in",
"alive" and "heartbeat age" judge them against this process's wall clock
with the read model's rules (``weft_django.models.querysets``,
``weft_django.inspection``): the judgement ``weft_status``, the API and the
Prometheus collector use.
"""

from __future__ import annotations

from .async_activities import AsyncActivityAdmin
from .attempts import ActivityAttemptAdmin
from .base import ReadOnlyAdmin, ReadOnlyInline, WeftDatabaseMixin
from .claims import ClaimStateFilter, HolderAdmin
from .engines import EngineAliveFilter, EngineRecordAdmin
from .queues import QueueAdmin
from .reporting import ActionReport
from .runs.admin import WorkflowRunAdmin
from .runs.inlines import JournalEntryInline, TimerInline
from .schedules import ScheduleAdmin
from .search import ExactSearchMixin
from .signals import SignalMessageAdmin, SignalStateFilter
from .singletons import ClaimEventAdmin, GlobalLeaseAdmin, OwnershipModeMarkerAdmin
from .timeline import TIMELINE_LIMIT

__all__ = [
    "TIMELINE_LIMIT",
    "ActionReport",
    "ActivityAttemptAdmin",
    "AsyncActivityAdmin",
    "ClaimEventAdmin",
    "ClaimStateFilter",
    "EngineAliveFilter",
    "EngineRecordAdmin",
    "ExactSearchMixin",
    "GlobalLeaseAdmin",
    "HolderAdmin",
    "JournalEntryInline",
    "OwnershipModeMarkerAdmin",
    "QueueAdmin",
    "ReadOnlyAdmin",
    "ReadOnlyInline",
    "ScheduleAdmin",
    "SignalMessageAdmin",
    "SignalStateFilter",
    "TimerInline",
    "WeftDatabaseMixin",
    "WorkflowRunAdmin",
]
