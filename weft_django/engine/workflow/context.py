"""``ctx``: what a workflow body uses to build commands (SPEC §1).

Methods that return a command (``run``, ``sleep``, ...) do nothing by
themselves; the body must ``await`` them (an ``async def`` body) or ``yield``
them (a generator body). Each is typed from what it waits for: ``ctx.run(fn,
...)`` is a ``RunActivity[R]`` of ``fn``'s result ``R`` (``engine.workflow.typing``
holds the overloads of ``ctx.all``/``race``). Methods that return a value
(``now``, ``uuid4``, ``random``, ``patched``) record it in the journal the
first time and replay it afterwards, so a replay takes the same path.

``ctx`` depends on a ``WorkflowRuntime`` it declares here (what it needs from
whatever drives the body: replay state, recorded values, the clock), never
on the replay module: the arrow points one way, replay → context.
"""

from __future__ import annotations

import logging
import random as _random
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any, Literal, ParamSpec, Protocol, TypeVar, overload

from weft_django.engine.workflow import publish
from weft_django.engine.workflow.commands import (
    ContinueAsNew,
    RunActivity,
    SignalWorkflow,
    Sleep,
    StartAsyncActivity,
    StartChild,
    WaitSignal,
    WaitUntil,
)
from weft_django.engine.workflow.definitions import (
    activity_definition,
    result_rebuild_of,
    workflow_target,
)
from weft_django.engine.workflow.groups import GroupMethods
from weft_django.engine.workflow.payload_types import rebuilder
from weft_django.engine.workflow.saga import Saga
from weft_django.kernel.durations import optional_ms, to_ms

P = ParamSpec("P")
T = TypeVar("T")
A = TypeVar("A")

SideEffectKind = Literal["now", "uuid", "random"] | publish.PublishKind
"""Values ``ctx`` records once and replays (``patch`` has ``patched()``)."""


class WorkflowRuntime(Protocol):
    """What ``ctx`` needs from the runtime driving the body (``Replay`` is one)."""

    @property
    def is_replaying(self) -> bool:
        """The body is re-running recorded history (``ctx.logger`` stays silent)."""
        ...

    def clock_ms(self) -> int:
        """The engine clock, in ms (what ``ctx.now()`` records)."""
        ...

    def side_effect(self, kind: SideEffectKind, target: str, make: Callable[[], Any]) -> Any:
        """The recorded value of this ``kind`` here, or ``make()``'s, recorded."""
        ...

    def patched(self, change_id: str) -> bool:
        """Whether this run takes the new path of ``change_id``."""
        ...

    def deprecate_patch(self, change_id: str) -> None:
        """``change_id``'s new path is the only one now (``engine.patches``)."""
        ...


def _change_id(value: object) -> str:
    """A patch id is a journal ``target``: a non-empty string of at most 200 characters."""
    if not isinstance(value, str) or not value or len(value) > 200:
        raise ValueError(
            f"a patch change_id must be a non-empty string of at most 200 characters, "
            f"got {value!r:.100}"
        )
    return value


def duration_ms(value: timedelta | float | int | None, what: str) -> int | None:
    """A ``ctx`` duration in ms (``None`` stays ``None``): ``durations.optional_ms``."""
    return optional_ms(value, what)


class _ReplayAwareLogger(logging.LoggerAdapter[logging.Logger]):
    """Silent while the replay is re-running recorded history."""

    def __init__(self, logger: logging.Logger, ctx: WorkflowContext) -> None:
        super().__init__(logger, {})
        self._ctx = ctx

    def log(self, level: int, msg: object, *args: Any, **kwargs: Any) -> None:
        if not self._ctx.is_replaying:
            super().log(level, msg, *args, **kwargs)

    def process(self, msg: Any, kwargs: Any) -> tuple[Any, Any]:
        return f"[{self._ctx.workflow_id}] {msg}", kwargs


class WorkflowContext(GroupMethods):
    """The ``ctx`` argument of a workflow."""

    def __init__(self, runtime: WorkflowRuntime, workflow_id: str, run_id: str, name: str) -> None:
        self._runtime = runtime
        self.workflow_id = workflow_id
        self.run_id = run_id
        self.workflow_name = name
        self.state: dict[str, Any] = {}
        self.signal_handlers: dict[str, Callable[[Any], Any]] = {}
        self.query_handlers: dict[str, Callable[..., Any]] = {}
        # name -> (handler, validator): ``engine.updates``.
        self.update_handlers: dict[str, tuple[Callable[..., Any], Callable[..., Any] | None]] = {}
        self._streams = publish.StreamState()
        self.logger = _ReplayAwareLogger(logging.getLogger(f"weft_django.workflow.{name}"), self)

    @property
    def is_replaying(self) -> bool:
        return self._runtime.is_replaying

    # -- commands ------------------------------------------------------------
    @overload
    def run(  # type: ignore[overload-overlap]
        self, target: Callable[P, Awaitable[T]], *args: P.args, **kwargs: P.kwargs
    ) -> RunActivity[T]: ...
    @overload
    def run(self, target: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> RunActivity[T]: ...
    @overload
    def run(self, target: str, *args: Any, **kwargs: Any) -> RunActivity[Any]: ...
    def run(self, target: Any, *args: Any, **kwargs: Any) -> RunActivity[Any]:
        """The activity ``target`` (an ``@activity`` function or its name) with
        these arguments; ``await`` gives its result, typed as ``target``'s."""
        definition = activity_definition(target)
        if definition is None:
            raise TypeError(f"ctx.run() needs an @activity function or its name, got {target!r}")
        return RunActivity(definition.name, tuple(args), dict(kwargs), definition.result_rebuild)

    def sleep(self, duration: timedelta | float) -> Sleep:
        return Sleep(to_ms(duration, "ctx.sleep duration"))

    @overload
    def wait_for_signal(
        self, name: str, timeout: timedelta | float | None = None, *, type: None = None
    ) -> WaitSignal[Any]: ...
    @overload
    def wait_for_signal(
        self, name: str, timeout: timedelta | float | None = None, *, type: type[T]
    ) -> WaitSignal[T | None]: ...
    def wait_for_signal(
        self, name: str, timeout: timedelta | float | None = None, *, type: Any = None
    ) -> WaitSignal[Any]:
        """The next ``name`` signal's payload (``None`` after ``timeout``);
        ``type=T``: rebuilt as ``T`` (a dataclass, a pydantic model, ...)."""
        rebuild = None if type is None else rebuilder(type, f"wait_for_signal({name!r}) type")
        return WaitSignal(name, duration_ms(timeout, "wait_for_signal timeout"), rebuild)

    def wait_until(
        self, predicate: Callable[[], bool], timeout: timedelta | float | None = None
    ) -> WaitUntil:
        """Wait until ``predicate()`` holds (``True``; ``None`` after ``timeout``)."""
        if not callable(predicate):
            raise TypeError("ctx.wait_until() needs a callable predicate")
        return WaitUntil(predicate, duration_ms(timeout, "wait_until timeout"))

    def async_activity(
        self, target: Any, *args: Any, timeout: timedelta | float | None = None
    ) -> StartAsyncActivity:
        definition = activity_definition(target)
        if definition is None and not isinstance(target, str):
            raise TypeError("ctx.async_activity() needs an @activity function or a plain name")
        name = definition.name if definition is not None else str(target)
        return StartAsyncActivity(
            name,
            definition is not None,
            tuple(args),
            duration_ms(timeout, "async timeout"),
            definition.result_rebuild if definition is not None else None,
        )

    @overload
    def start_child(
        self,
        name: Callable[[Any, A], Awaitable[T]],
        input: A = ...,
        workflow_id: str | None = None,
        detached: bool = False,
        *,
        queue: str | None = None,
        priority: int = 0,
        concurrency_key: str | None = None,
    ) -> StartChild[T]: ...
    @overload
    def start_child(
        self,
        name: Any,
        input: Any = None,
        workflow_id: str | None = None,
        detached: bool = False,
        *,
        queue: str | None = None,
        priority: int = 0,
        concurrency_key: str | None = None,
    ) -> StartChild[Any]: ...
    def start_child(
        self,
        name: Any,
        input: Any = None,
        workflow_id: str | None = None,
        detached: bool = False,
        *,
        queue: str | None = None,
        priority: int = 0,
        concurrency_key: str | None = None,
    ) -> StartChild[Any]:
        """A child run (a workflow's name or its function); the body waits for
        its result -- or, ``detached=True``, only for its start: the command
        resolves to the child's workflow id, and the child outlives the parent
        (not cancelled with it).

        A child of a queue (``queue``, else its ``@workflow(queue=...)``) is
        written ``pending`` and admitted like any queued run."""
        child = workflow_target(name)
        rebuild = None if detached else result_rebuild_of(child)
        return StartChild(
            child,
            input,
            workflow_id,
            bool(detached),
            queue=queue,
            priority=priority,
            concurrency_key=concurrency_key,
            rebuild=rebuild,
        )

    def signal_workflow(self, workflow_id: str, name: str, payload: Any = None) -> SignalWorkflow:
        """Signal another workflow, once (yield it): the signal is written in the
        batch that journals the command, so a replay never sends it again."""
        if not isinstance(name, str) or not name or len(name) > 200:
            raise ValueError(
                f"signal name must be a non-empty string of at most 200 characters, got {name!r}"
            )
        return SignalWorkflow(str(workflow_id), name, payload)

    def continue_as_new(self, input: Any = None) -> ContinueAsNew:
        """End this run and start a new one of the same workflow with ``input``."""
        return ContinueAsNew(input)

    def saga(self) -> Saga:
        """A saga: ``saga.add(compensation, *args)`` after each step, then
        ``await saga.compensate()`` (a generator body: ``yield from``) to undo them in reverse order
        (``engine.saga``). Built by the body, so replay rebuilds it."""
        return Saga(self)

    # -- recorded values -----------------------------------------------------
    def now(self) -> datetime:
        ms = self._runtime.side_effect("now", "", self._runtime.clock_ms)
        return datetime.fromtimestamp(int(ms) / 1000, tz=UTC)

    def uuid4(self) -> uuid.UUID:
        return uuid.UUID(str(self._runtime.side_effect("uuid", "", lambda: str(uuid.uuid4()))))

    def random(self) -> float:
        return float(self._runtime.side_effect("random", "", _random.random))

    def patched(self, change_id: str) -> bool:
        return self._runtime.patched(_change_id(change_id))

    def deprecate_patch(self, change_id: str) -> None:
        """Mark ``change_id``'s patch as always taken, before removing its old
        branch (``engine.patches``: the three deploys of a change)."""
        self._runtime.deprecate_patch(_change_id(change_id))

    # -- published values (engine.publish) -----------------------------------
    def set_event(self, key: str, value: Any) -> None:
        """Publish ``value`` under ``key`` (last value wins): ``client.get_event``."""
        publish.set_event(self._runtime, key, value)

    def write_stream(self, key: str, value: Any) -> int:
        """Append ``value`` to stream ``key``; returns its offset (0, 1, ...)."""
        return publish.write_stream(self._runtime, self._streams, key, value)

    def close_stream(self, key: str) -> None:
        """End stream ``key`` (readers stop); streams also end with the run."""
        publish.close_stream(self._runtime, self._streams, key)

    def upsert_search_attributes(self, **attrs: Any) -> None:
        """Set the run's search attributes (``None`` unsets one): what
        ``client.list_runs``, the API and the admin filter on.

        Each name must be declared in ``WEFT["SEARCH_ATTRIBUTES"]`` and each
        value be of its type (``TypeError`` here otherwise, nothing
        recorded). Recorded once, like ``set_event``: a replay writes
        nothing again. ``continue_as_new`` carries them to the new run;
        a child starts without any.
        """
        publish.upsert_search_attributes(self._runtime, attrs)

    # -- handlers ------------------------------------------------------------
    def on_signal(self, name: str, fn: Callable[[Any], Any]) -> None:
        self.signal_handlers[name] = fn

    def on_query(self, name: str, fn: Callable[..., Any]) -> None:
        self.query_handlers[name] = fn

    def on_update(
        self,
        name: str,
        handler: Callable[..., Any],
        validator: Callable[..., Any] | None = None,
    ) -> None:
        """Answer ``client.update(workflow_id, name, *args)`` (``engine.updates``).

        ``validator(*args)`` runs first, read-only, in the caller's process:
        raising rejects the update (``UpdateRejected``), and nothing is
        recorded. ``handler(*args)`` then runs in the owner's turn; it may be
        a generator that yields commands; its return value is recorded and
        returned to the caller (once per ``update_id``).
        """
        if not isinstance(name, str) or not name or len(name) > 200:
            raise ValueError(
                f"update name must be a non-empty string of at most 200 characters, got {name!r}"
            )
        if not callable(handler) or (validator is not None and not callable(validator)):
            raise TypeError("ctx.on_update() needs a callable handler (and validator)")
        self.update_handlers[name] = (handler, validator)
