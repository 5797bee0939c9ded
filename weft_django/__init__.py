"""weft-django: durable workflows with fenced per-workflow ownership.

The public names: the decorators, the client and its handle, the run filter,
the fencing helpers and every error a caller can catch. They are loaded
lazily (module ``__getattr__``) so that importing the package never touches
models before the app registry is ready.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_LAZY: dict[str, tuple[str, str | None]] = {
    "workflow": ("weft_django.engine.workflow.definitions", "workflow"),
    "activity": ("weft_django.engine.workflow.definitions", "activity"),
    "WorkflowContext": ("weft_django.engine.workflow.context", "WorkflowContext"),
    "client": ("weft_django.client", None),
    "WorkflowHandle": ("weft_django.client", "WorkflowHandle"),
    "RunFilter": ("weft_django.engine.runs.filters", "RunFilter"),
    "AttributeRange": ("weft_django.engine.runs.filters", "AttributeRange"),
    "activity_info": ("weft_django.engine.activities.info", "activity_info"),
    "ActivityInfo": ("weft_django.engine.activities.info", "ActivityInfo"),
    "FencedModel": ("weft_django.fencing", "FencedModel"),
    "fenced_update": ("weft_django.fencing", "fenced_update"),
    "afenced_update": ("weft_django.fencing", "afenced_update"),
    **{
        name: ("weft_django.errors", name)
        for name in (
            "ActivityCancelled",
            "ActivityError",
            "AsyncActivityTokenError",
            "ChildWorkflowError",
            "CrashLoopError",
            "EngineDeposedError",
            "EngineLeaseAcquisitionTimeoutError",
            "EngineLeaseCorruptedError",
            "IdempotencyConflictError",
            "InvalidArgumentError",
            "InvalidRunFilter",
            "InvalidTransitionError",
            "NonDeterminismError",
            "NotLocallyOwned",
            "OwnershipModeMismatchError",
            "PayloadError",
            "PayloadTypeMismatch",
            "SagaCompensationError",
            "ScheduleAlreadyExists",
            "ScheduleNotFound",
            "StaleFenceError",
            "UnknownQuery",
            "UnknownUpdate",
            "UnknownWorkflowType",
            "UpdateRejected",
            "WeftError",
            "WorkflowAlreadyRunning",
            "WorkflowCancelled",
            "WorkflowClaimUnavailableError",
            "WorkflowFailedError",
            "WorkflowFinishedError",
            "WorkflowNotFound",
            "WorkflowTimeoutError",
        )
    },
}

if TYPE_CHECKING:  # pragma: no cover
    from weft_django import client
    from weft_django.client import WorkflowHandle as WorkflowHandle
    from weft_django.engine.activities.info import ActivityInfo as ActivityInfo
    from weft_django.engine.activities.info import activity_info as activity_info
    from weft_django.engine.runs.filters import AttributeRange as AttributeRange
    from weft_django.engine.runs.filters import RunFilter as RunFilter
    from weft_django.engine.workflow.context import WorkflowContext as WorkflowContext
    from weft_django.engine.workflow.definitions import activity as activity
    from weft_django.engine.workflow.definitions import workflow as workflow
    from weft_django.errors import ActivityCancelled as ActivityCancelled
    from weft_django.errors import ActivityError as ActivityError
    from weft_django.errors import AsyncActivityTokenError as AsyncActivityTokenError
    from weft_django.errors import ChildWorkflowError as ChildWorkflowError
    from weft_django.errors import CrashLoopError as CrashLoopError
    from weft_django.errors import EngineDeposedError as EngineDeposedError
    from weft_django.errors import (
        EngineLeaseAcquisitionTimeoutError as EngineLeaseAcquisitionTimeoutError,
    )
    from weft_django.errors import EngineLeaseCorruptedError as EngineLeaseCorruptedError
    from weft_django.errors import IdempotencyConflictError as IdempotencyConflictError
    from weft_django.errors import InvalidArgumentError as InvalidArgumentError
    from weft_django.errors import InvalidRunFilter as InvalidRunFilter
    from weft_django.errors import InvalidTransitionError as InvalidTransitionError
    from weft_django.errors import NonDeterminismError as NonDeterminismError
    from weft_django.errors import NotLocallyOwned as NotLocallyOwned
    from weft_django.errors import OwnershipModeMismatchError as OwnershipModeMismatchError
    from weft_django.errors import PayloadError as PayloadError
    from weft_django.errors import PayloadTypeMismatch as PayloadTypeMismatch
    from weft_django.errors import SagaCompensationError as SagaCompensationError
    from weft_django.errors import ScheduleAlreadyExists as ScheduleAlreadyExists
    from weft_django.errors import ScheduleNotFound as ScheduleNotFound
    from weft_django.errors import StaleFenceError as StaleFenceError
    from weft_django.errors import UnknownQuery as UnknownQuery
    from weft_django.errors import UnknownUpdate as UnknownUpdate
    from weft_django.errors import UnknownWorkflowType as UnknownWorkflowType
    from weft_django.errors import UpdateRejected as UpdateRejected
    from weft_django.errors import WeftError as WeftError
    from weft_django.errors import WorkflowAlreadyRunning as WorkflowAlreadyRunning
    from weft_django.errors import WorkflowCancelled as WorkflowCancelled
    from weft_django.errors import WorkflowClaimUnavailableError as WorkflowClaimUnavailableError
    from weft_django.errors import WorkflowFailedError as WorkflowFailedError
    from weft_django.errors import WorkflowFinishedError as WorkflowFinishedError
    from weft_django.errors import WorkflowNotFound as WorkflowNotFound
    from weft_django.errors import WorkflowTimeoutError as WorkflowTimeoutError
    from weft_django.fencing import FencedModel as FencedModel
    from weft_django.fencing import afenced_update as afenced_update
    from weft_django.fencing import fenced_update as fenced_update


def __getattr__(name: str) -> Any:
    try:
        module_name, attr = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module 'weft_django' has no attribute {name!r}") from None
    module = import_module(module_name)
    value = module if attr is None else getattr(module, attr)
    globals()[name] = value
    return value


__all__ = [
    "ActivityCancelled",
    "ActivityError",
    "ActivityInfo",
    "AsyncActivityTokenError",
    "AttributeRange",
    "ChildWorkflowError",
    "CrashLoopError",
    "EngineDeposedError",
    "EngineLeaseAcquisitionTimeoutError",
    "EngineLeaseCorruptedError",
    "FencedModel",
    "IdempotencyConflictError",
    "InvalidArgumentError",
    "InvalidRunFilter",
    "InvalidTransitionError",
    "NonDeterminismError",
    "NotLocallyOwned",
    "OwnershipModeMismatchError",
    "PayloadError",
    "PayloadTypeMismatch",
    "RunFilter",
    "SagaCompensationError",
    "ScheduleAlreadyExists",
    "ScheduleNotFound",
    "StaleFenceError",
    "UnknownQuery",
    "UnknownUpdate",
    "UnknownWorkflowType",
    "UpdateRejected",
    "WeftError",
    "WorkflowAlreadyRunning",
    "WorkflowCancelled",
    "WorkflowClaimUnavailableError",
    "WorkflowContext",
    "WorkflowFailedError",
    "WorkflowFinishedError",
    "WorkflowHandle",
    "WorkflowNotFound",
    "WorkflowTimeoutError",
    "__version__",
    "activity",
    "activity_info",
    "afenced_update",
    "client",
    "fenced_update",
    "workflow",
]
