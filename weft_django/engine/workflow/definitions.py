"""``@workflow`` / ``@activity`` and the name registry (SPEC §1).

Workflows and activities are registered by *name*, because the journal and
the runs table store names, not Python objects: a deploy that moves a
function keeps its runs working as long as the name stays. Each installed
app's ``workflows.py`` is imported at start-up (``autodiscover``).

``@activity`` checks what it decorates and every option at definition time,
so a mistake fails at import with the bad value named -- not at run time,
inside a turn, as "Object of type coroutine is not JSON serializable" did.
Whether an activity is ``async def`` is decided once here
(``ActivityDefinition.is_async``): the executor runs the two kinds on
different machinery (threads, one event loop) and must never guess.
"""

from __future__ import annotations

import inspect
import math
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, TypeVar

from weft_django.engine.workflow.activity_definition import ActivityDefinition
from weft_django.engine.workflow.activity_functions import (
    check_activity_function as _check_activity_function,
)
from weft_django.engine.workflow.activity_functions import default_name as _default_name
from weft_django.engine.workflow.activity_functions import innermost as _innermost
from weft_django.engine.workflow.atomic_options import check_atomic_options
from weft_django.engine.workflow.declared import parameter_annotations, return_annotation
from weft_django.engine.workflow.payload_types import (
    Rebuild,
    rebuilder,
)
from weft_django.engine.workflow.routed_options import check_routing_options
from weft_django.errors import UnknownWorkflowType
from weft_django.kernel.durations import optional_ms

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class WorkflowDefinition:
    """A workflow: an ``async def`` (or generator) function ``(ctx, input) -> result``.

    ``input_rebuild`` / ``result_rebuild``: how the stored input and result
    are rebuilt as the declared parameter and return types (``None``: handed
    over as stored), decided once at decoration (``payload_types``).
    """

    name: str
    fn: Callable[..., Any]
    #: The grace a cancel of this workflow gets when the caller names none
    #: (``@workflow(cancel_grace=...)``); ``None``: an immediate cancel.
    cancel_grace_ms: int | None = None
    #: ``@workflow(queue=...)``: the queue a start names when it names none.
    queue: str | None = None
    input_rebuild: Rebuild | None = None
    result_rebuild: Rebuild | None = None
    #: An ``async def`` body: values are rebuilt as declared, ctx commands awaited.
    is_async: bool = False


def _workflow_definition(
    name: str, fn: Callable[..., Any], grace_ms: int | None, queue: str | None
) -> WorkflowDefinition:
    """The definition of ``fn``, its declared types checked (``TypeError`` names one
    that cannot be rebuilt from JSON)."""
    is_async = inspect.iscoroutinefunction(_innermost(fn))
    params = parameter_annotations(fn)
    where = f"workflow {name!r}"
    try:
        input_rebuild = rebuilder(params[1], f"{where} input") if len(params) > 1 else None
        result_rebuild = rebuilder(return_annotation(fn), f"{where} result")
    except TypeError:
        if is_async:
            raise
        # A generator body receives stored JSON whatever it declares (its contract).
        input_rebuild = result_rebuild = None
    return WorkflowDefinition(
        name, fn, grace_ms, queue, input_rebuild, result_rebuild, is_async=is_async
    )


def result_rebuild_of(name: str) -> Rebuild | None:
    """How workflow ``name``'s result is rebuilt (``None``: unknown here, or as stored)."""
    definition = registry.workflows.get(name)
    return definition.result_rebuild if definition is not None else None


def workflow_target(target: Any) -> str:
    """The workflow name ``target`` stands for: a name, or an ``@workflow`` function."""
    name = getattr(target, "__weft_workflow__", None)
    if isinstance(name, str):
        return name
    if isinstance(target, str):
        return target
    raise TypeError(f"expected a workflow name or an @workflow function, got {target!r:.200}")


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
            self.workflows[name] = _workflow_definition(
                name, fn, before.cancel_grace_ms, before.queue
            )
        try:
            yield
        finally:
            with self.lock:
                self.workflows[name] = before


registry = WorkflowRegistry()
"""The default registry, filled by ``@workflow`` and ``@activity``."""

#: Late registration: callables ``resolver(target) -> name | None`` asked for a
#: workflow or activity this registry does not know (a name, or an object that
#: is no decorated function). A resolver that recognises ``target`` registers
#: the workflow and/or activity it stands for and returns its name. Django
#: tasks use it (``weft_django.tasks``): a task's run is a workflow named by
#: the task's module path, registered in whichever process first meets it.
resolvers: list[Callable[[Any], str | None]] = []


def _resolve(target: Any) -> str | None:
    for resolver in list(resolvers):
        name = resolver(target)
        if name is not None:
            return name
    return None


def workflow(
    name: str | None = None,
    *,
    cancel_grace: timedelta | float | None = None,
    queue: str | None = None,
) -> Callable[[F], F]:
    """Register an ``async def`` (or generator) function as the workflow ``name``.

    Its input parameter and return annotations, when a dataclass, a pydantic
    model or a container of them, are how the stored input and result are
    rebuilt for code that receives them; any other class is refused here,
    named (``TypeError``).

    ``cancel_grace``: how long a cancel that names no grace lets the workflow
    clean up (``WorkflowCancelled`` is thrown into it); ``None``: a cancel
    ends the run at once, as it always did.

    ``queue``: a queue of ``WEFT["QUEUES"]`` every start of it joins unless
    the start names one (``engine.queues``; system check ``weft.E031``).
    """
    grace_ms = optional_ms(cancel_grace, "workflow cancel_grace", allow_zero=False)
    if queue is not None and not isinstance(queue, str):
        raise ValueError(f"workflow queue must be a queue name, got {queue!r}")

    def decorate(fn: F) -> F:
        wf_name = name or fn.__name__
        _check_name(wf_name, "workflow")
        definition = _workflow_definition(wf_name, fn, grace_ms, queue)
        with registry.lock:
            existing = registry.workflows.get(wf_name)
            if existing is not None and _qualname(existing.fn) != _qualname(fn):
                raise ValueError(
                    f"workflow name {wf_name!r} is already registered by {_qualname(existing.fn)}"
                )
            registry.workflows[wf_name] = definition
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
    heartbeat_timeout: timedelta | float | None = None,
    max_backoff: timedelta | float | None = None,
    jitter: float = 0.0,
    atomic: bool = False,
    using: str | None = None,
    celery_queue: str | None = None,
    queue: str | None = None,
) -> Callable[[F], F]:
    """Register a function (or an ``async def`` function) as an activity.

    It stays callable directly. ``heartbeat_timeout``: an attempt that sends
    no ``activity_info().heartbeat()`` for this long fails as timed out (and
    is retried under ``retries``). ``max_backoff`` caps each retry delay (at
    least ``backoff``); ``jitter`` is a fraction in [0, 1] by which each
    delay is randomly spread.

    ``atomic=True`` (a plain function only): the activity's ORM writes on the
    weft database alias, the journal entry of its result and the run's state
    commit in ONE transaction, under the claim fence -- its database effect
    happens exactly once (docs/howto/exactly-once.md). ``using``: the alias
    the atomic activity writes through, checked to be the weft alias (an
    assertion for the reader; it changes nothing else).

    ``celery_queue``: each attempt runs as a Celery task on that queue, on
    any worker that imports the activity; its result comes back through the
    fenced routed-result path (docs/howto/routing-activities.md).
    ``queue``: a queue of ``WEFT["QUEUES"]`` whose concurrency and rate every
    attempt draws on, across all engines (not with ``atomic``; system check
    ``weft.E031``).
    """
    if queue is not None and (not isinstance(queue, str) or atomic):
        raise ValueError(f"activity queue must be a queue name (not with atomic), got {queue!r}")
    if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
        raise ValueError(f"activity retries must be a non-negative integer, got {retries!r}")
    backoff_ms = optional_ms(backoff, "activity backoff") or 0
    timeout_ms = optional_ms(timeout, "activity timeout")
    heartbeat_timeout_ms = optional_ms(
        heartbeat_timeout, "activity heartbeat_timeout", allow_zero=False
    )
    max_backoff_ms = optional_ms(max_backoff, "activity max_backoff")
    if max_backoff_ms is not None and max_backoff_ms < backoff_ms:
        raise ValueError(
            f"activity max_backoff must be at least backoff ({backoff_ms} ms), "
            f"got {max_backoff!r} ({max_backoff_ms} ms)"
        )
    jitter_fraction = _check_jitter(jitter)
    non_retryable_types = tuple(non_retryable)
    if not isinstance(atomic, bool):
        raise TypeError(f"activity atomic must be True or False, got {atomic!r}")

    def decorate(fn: F) -> F:
        is_async = _check_activity_function(fn)
        act_name = name or _default_name(fn)
        _check_name(act_name, "activity")
        result_rebuild = rebuilder(return_annotation(fn), f"activity {act_name!r} result")
        if atomic or using is not None:
            check_atomic_options(
                act_name,
                atomic=atomic,
                is_async=is_async,
                using=using,
                heartbeat_timeout_ms=heartbeat_timeout_ms,
                routed={"celery_queue": celery_queue},
            )
        if celery_queue is not None:
            check_routing_options(
                act_name,
                celery_queue,
                timeout_ms=timeout_ms,
                heartbeat_timeout_ms=heartbeat_timeout_ms,
            )
        definition = ActivityDefinition(
            act_name,
            fn,
            retries,
            backoff_ms,
            timeout_ms,
            non_retryable_types,
            is_async=is_async,
            heartbeat_timeout_ms=heartbeat_timeout_ms,
            max_backoff_ms=max_backoff_ms,
            jitter=jitter_fraction,
            atomic=atomic,
            celery_queue=celery_queue,
            queue=queue,
            result_rebuild=result_rebuild,
        )
        with registry.lock:
            registry.activities[act_name] = definition
        fn.__weft_activity__ = definition  # type: ignore[attr-defined]
        return fn

    return decorate


def _check_jitter(value: object) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or math.isnan(value)
        or not 0 <= value <= 1
    ):
        raise ValueError(
            f"activity jitter must be a fraction between 0 and 1 (0.1 = ±10 %), got {value!r}"
        )
    return float(value)


def _check_name(value: str, what: str) -> None:
    if not isinstance(value, str) or not value or len(value) > 200:
        raise ValueError(f"{what} name must be a non-empty string of at most 200 characters")


def _qualname(fn: Callable[..., Any]) -> str:
    return f"{fn.__module__}.{fn.__qualname__}"


def get_workflow(name: str) -> WorkflowDefinition:
    try:
        return registry.workflows[name]
    except KeyError:
        if resolvers and _resolve(name) is not None and name in registry.workflows:
            return registry.workflows[name]
        raise UnknownWorkflowType(name) from None


def workflow_name_of(target: Any) -> Any:
    """The workflow name ``target`` stands for: a name, an ``@workflow`` function, or
    an object a resolver registers (a Django task); anything else unchanged (the
    caller's validation names it)."""
    if isinstance(target, str):
        return target
    name = getattr(target, "__weft_workflow__", None)
    if isinstance(name, str):
        return name
    resolved = _resolve(target) if resolvers else None
    return resolved if resolved is not None and resolved in registry.workflows else target


def has_workflow(name: str) -> bool:
    if name in registry.workflows:
        return True
    return bool(resolvers) and _resolve(name) is not None and name in registry.workflows


def workflow_names() -> list[str]:
    return sorted(registry.workflows)


def activity_definition(target: Any) -> ActivityDefinition | None:
    """The definition behind a decorated function or a registered name."""
    definition = getattr(target, "__weft_activity__", None)
    if isinstance(definition, ActivityDefinition):
        return definition
    if isinstance(target, str):
        found = registry.activities.get(target)
        if found is not None or not resolvers:
            return found
    name = _resolve(target) if resolvers else None
    return registry.activities.get(name) if name is not None else None


def get_activity(name: str) -> ActivityDefinition:
    definition = registry.activities.get(name)
    if definition is None and resolvers and _resolve(name) is not None:
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
