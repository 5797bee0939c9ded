"""Durable state (SPEC §4.1), one module per family of rows; this package names them
all, as Django's ``models`` convention expects (the app label is ``weft``)."""

from __future__ import annotations

from weft_django.models.attempts import ActivityAttempt, AttemptOutcome
from weft_django.models.choices import (
    CLAIM_EVENT_KINDS,
    DRIVABLE_STATUSES,
    LIVE_STATUSES,
    RUN_STATUSES,
    TERMINAL_STATUSES,
    AsyncStatus,
    ClaimEventKind,
    ClaimEventKindValue,
    RunStatus,
    RunStatusValue,
    TimerKind,
)
from weft_django.models.claims import ClaimEvent, GlobalLease, OwnershipModeMarker, WorkflowClaim
from weft_django.models.engines import EngineRecord, MetricTotals
from weft_django.models.published import RunSearchAttribute, StreamEntry, WorkflowEvent
from weft_django.models.queues import QueueLock, QueueSlot
from weft_django.models.routed import RoutedAttempt, RoutedStatus
from weft_django.models.runs import (
    ActivityHeartbeat,
    AsyncActivity,
    JournalEntry,
    SignalMessage,
    Timer,
    UpdateRequest,
    WorkflowRun,
)
from weft_django.models.schedules import Schedule

__all__ = [
    "CLAIM_EVENT_KINDS",
    "DRIVABLE_STATUSES",
    "LIVE_STATUSES",
    "RUN_STATUSES",
    "TERMINAL_STATUSES",
    "ActivityAttempt",
    "ActivityHeartbeat",
    "AsyncActivity",
    "AsyncStatus",
    "AttemptOutcome",
    "ClaimEvent",
    "ClaimEventKind",
    "ClaimEventKindValue",
    "EngineRecord",
    "GlobalLease",
    "JournalEntry",
    "MetricTotals",
    "OwnershipModeMarker",
    "QueueLock",
    "QueueSlot",
    "RoutedAttempt",
    "RoutedStatus",
    "RunSearchAttribute",
    "RunStatus",
    "RunStatusValue",
    "Schedule",
    "SignalMessage",
    "StreamEntry",
    "Timer",
    "TimerKind",
    "UpdateRequest",
    "WorkflowClaim",
    "WorkflowEvent",
    "WorkflowRun",
]
