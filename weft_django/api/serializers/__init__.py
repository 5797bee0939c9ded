"""Request and response bodies of the weft REST API (SPEC §5).

``fields`` (strict input fields), ``requests`` (bodies and query parameters),
``async_activities`` (the bodies that settle an async activity), ``responses`` (rows, as
``ModelSerializer``s), ``results`` (errors, action results, ownership, metrics). Every
name is importable from here, as before the split.
"""

from __future__ import annotations

from .async_activities import (
    AsyncErrorSerializer,
    CompleteAsyncSerializer,
    FailAsyncSerializer,
)
from .claims import ClaimEventSerializer, ClaimSerializer, EngineSerializer
from .fields import (
    MAX_DURATION_SECONDS,
    JSONArgsField,
    JSONPayloadField,
    SecondsField,
    StrictBooleanField,
    StrictCharField,
)
from .requests import (
    BulkActionSerializer,
    CancelSerializer,
    ClaimListParams,
    ForkSerializer,
    QuerySerializer,
    ReasonSerializer,
    ResetSerializer,
    RunFilterSerializer,
    RunParams,
    SignalSerializer,
    StartWorkflowSerializer,
    WorkflowListParams,
    filter_params,
)
from .responses import (
    TOKEN_HASH_PREFIX_LEN,
    ActivityAttemptSerializer,
    ActivityHeartbeatSerializer,
    JournalEntrySerializer,
    PendingAsyncSerializer,
    WorkflowDetailSerializer,
    WorkflowSummarySerializer,
)
from .results import (
    AsyncSettledSerializer,
    BulkResultSerializer,
    ClaimCountsSerializer,
    EngineCountsSerializer,
    ErrorSerializer,
    HolderSerializer,
    MetricsSerializer,
    OwnerSerializer,
    OwnershipSerializer,
    PurgeResultSerializer,
    QueryResultSerializer,
    SignalAcceptedSerializer,
    ValidationErrorSerializer,
    WakeCountSerializer,
)

__all__ = [
    "MAX_DURATION_SECONDS",
    "TOKEN_HASH_PREFIX_LEN",
    "ActivityAttemptSerializer",
    "ActivityHeartbeatSerializer",
    "AsyncErrorSerializer",
    "AsyncSettledSerializer",
    "BulkActionSerializer",
    "BulkResultSerializer",
    "CancelSerializer",
    "ClaimCountsSerializer",
    "ClaimEventSerializer",
    "ClaimListParams",
    "ClaimSerializer",
    "CompleteAsyncSerializer",
    "EngineCountsSerializer",
    "EngineSerializer",
    "ErrorSerializer",
    "FailAsyncSerializer",
    "ForkSerializer",
    "HolderSerializer",
    "JSONArgsField",
    "JSONPayloadField",
    "JournalEntrySerializer",
    "MetricsSerializer",
    "OwnerSerializer",
    "OwnershipSerializer",
    "PendingAsyncSerializer",
    "PurgeResultSerializer",
    "QueryResultSerializer",
    "QuerySerializer",
    "ReasonSerializer",
    "ResetSerializer",
    "RunFilterSerializer",
    "RunParams",
    "SecondsField",
    "SignalAcceptedSerializer",
    "SignalSerializer",
    "StartWorkflowSerializer",
    "StrictBooleanField",
    "StrictCharField",
    "ValidationErrorSerializer",
    "WakeCountSerializer",
    "WorkflowDetailSerializer",
    "WorkflowListParams",
    "WorkflowSummarySerializer",
    "filter_params",
]
