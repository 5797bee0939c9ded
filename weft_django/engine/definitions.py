"""``@workflow`` / ``@activity`` and the name registry (SPEC §1).

Workflows and activities are registered by *name*, because the journal and
the runs table store names, not Python objects: a deploy that moves a
function keeps its runs working as long as the name stays. Each installed
app's ``workflows.py`` is imported at start-up (``autodiscover``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, TypeVar

from weft_django.durations import optional_ms
from weft_django.errors import UnknownWorkflowType

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class ActivityDefinition:
    """An activity: ordinary Python run by the owning engine, journaled."""

    name: str
    fn: Callable[..., Any]
    retries: int = 0
    backoff_ms: int = 1000
    timeout_ms: int | None = None
    non_retryable: tuple[type[BaseException], ...] = ()
    heartbeat_timeout_ms: int | None = None  # INTERIM

    def backoff_for(self, attempt: int) -> int:
        """Exponential delay before ``attempt`` (2, 3, ...): base × 2^(attempt-2)."""
        return self.backoff_ms * (2 ** max(0, attempt - 2))


@dataclass(frozen=True)
class WorkflowDefinition:
    """A workflow: a generator function ``(ctx, input) -> result``."""

    name: str
    fn: Callable[..., Any]


@dataclass
class WorkflowRegistry:
    """The names of this process's workflows and activities (one lock guards both)."""

    workflows: dict[str, WorkflowDefinition] = field(default_factory=dict)
    activities: dict[str, ActivityDefinition] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @contextmanager
    def swapped(self, name: str, fn: Callable[..., Any]) -> Iterator[None]:
        """Run ``fn`` as the registered workflow ``name`` inside the block, as a
        deploy of new code would (tests of determinism and ``patched``)."""
        with self.lock:
            if name not in self.workflows:
                raise UnknownWorkflowType(name)
            before = self.workflows[name]
            self.workflows[name] = WorkflowDefinition(name, fn)
        try:
            yield
        finally:
            with self.lock:
                self.workflows[name] = before


registry = WorkflowRegistry()
"""The default registry, filled by ``@workflow`` and ``@activity``."""


def workflow(name: str | None = None) -> Callable[[F], F]:
    """Register a generator function as the workflow ``name``."""

    def decorate(fn: F) -> F:
        wf_name = name or fn.__name__
        _check_name(wf_name, "workflow")
        with registry.lock:
            existing = registry.workflows.get(wf_name)
            if existing is not None and _qualname(existing.fn) != _qualname(fn):
                raise ValueError(
                    f"workflow name {wf_name!r} is already registered by {_qualname(existing.fn)}"
                )
            registry.workflows[wf_name] = WorkflowDefinition(wf_name, fn)
        fn.__weft_workflow__ = wf_name  # type: ignore[attr-defined]
        return fn

    return decorate


def activity(
    *,
    name: str | None = None,
    retries: int = 0,
    backoff: timedelta | float = timedelta(seconds=1),
    timeout: timedelta | float | None = None,
    non_retryable: Iterable[type[BaseException]] = (),
) -> Callable[[F], F]:
    """Register a function as an activity; it stays callable directly."""
    if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
        raise ValueError(f"activity retries must be a non-negative integer, got {retries!r}")
    backoff_ms = optional_ms(backoff, "activity backoff") or 0
    timeout_ms = optional_ms(timeout, "activity timeout")
    non_retryable_types = tuple(non_retryable)

    def decorate(fn: F) -> F:
        act_name = name or f"{fn.__module__}.{fn.__qualname__}"
        _check_name(act_name, "activity")
        definition = ActivityDefinition(
            act_name, fn, retries, backoff_ms, timeout_ms, non_retryable_types
        )
        with registry.lock:
            registry.activities[act_name] = definition
        fn.__weft_activity__ = definition  # type: ignore[attr-defined]
        return fn

    return decorate


def _check_name(value: str, what: str) -> None:
    if not isinstance(value, str) or not value or len(value) > 200:
        raise ValueError(f"{what} name must be a non-empty string of at most 200 characters")


def _qualname(fn: Callable[..., Any]) -> str:
    return f"{fn.__module__}.{fn.__qualname__}"


def get_workflow(name: str) -> WorkflowDefinition:
    try:
        return registry.workflows[name]
    except KeyError:
        raise UnknownWorkflowType(name) from None


def has_workflow(name: str) -> bool:
    return name in registry.workflows


def workflow_names() -> list[str]:
    return sorted(registry.workflows)


def activity_definition(target: Any) -> ActivityDefinition | None:
    """The definition behind a decorated function or a registered name."""
    definition = getattr(target, "__weft_activity__", None)
    if isinstance(definition, ActivityDefinition):
        return definition
    if isinstance(target, str):
        return registry.activities.get(target)
    return None


def get_activity(name: str) -> ActivityDefinition:
    definition = registry.activities.get(name)
    if definition is None:
        raise LookupError(
            f"activity {name!r} is not registered in this process; is the module that "
            "defines it imported (an app's workflows.py)?"
        )
    return definition


def autodiscover() -> None:
    """Import ``workflows`` from every installed app."""
    from django.utils.module_loading import autodiscover_modules

    autodiscover_modules("workflows")
