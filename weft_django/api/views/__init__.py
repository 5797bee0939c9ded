"""Views of the weft REST API (SPEC §5), one module per resource.

``base`` (the shared view class, the action base, the run lookup),
``workflows`` (list, start, detail, history), ``actions`` (signal, cancel,
suspend, resume, retry, purge, query, fork, reset), ``ownership`` (ownership, claim
events, claims, engines), ``metrics``, ``async_tokens`` (the token-authorised
endpoints) and ``fallback`` (the JSON 404). Every view is importable from
here, as before the split.
"""

from __future__ import annotations

from weft_django.api.logging import log_token_response

from .actions import (
    WorkflowCancelView,
    WorkflowForkView,
    WorkflowPurgeView,
    WorkflowQueryView,
    WorkflowResetView,
    WorkflowResumeView,
    WorkflowRetryView,
    WorkflowSignalView,
    WorkflowSuspendView,
)
from .async_tokens import (
    AsyncActivityCompleteByTokenView,
    AsyncActivityCompleteView,
    AsyncActivityFailByTokenView,
    AsyncActivityFailView,
)
from .base import WeftAPIView, WorkflowActionView
from .fallback import not_found
from .metrics import MetricsView
from .ownership import ClaimListView, EngineListView, WorkflowClaimEventsView, WorkflowOwnershipView
from .workflows import WorkflowDetailView, WorkflowHistoryView, WorkflowListView

__all__ = [
    "AsyncActivityCompleteByTokenView",
    "AsyncActivityCompleteView",
    "AsyncActivityFailByTokenView",
    "AsyncActivityFailView",
    "ClaimListView",
    "EngineListView",
    "MetricsView",
    "WeftAPIView",
    "WorkflowActionView",
    "WorkflowCancelView",
    "WorkflowClaimEventsView",
    "WorkflowDetailView",
    "WorkflowForkView",
    "WorkflowHistoryView",
    "WorkflowListView",
    "WorkflowOwnershipView",
    "WorkflowPurgeView",
    "WorkflowQueryView",
    "WorkflowResetView",
    "WorkflowResumeView",
    "WorkflowRetryView",
    "WorkflowSignalView",
    "WorkflowSuspendView",
    "log_token_response",
    "not_found",
]
