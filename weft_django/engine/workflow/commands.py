"""The commands a workflow ``yield``s (SPEC §1 "Commands").

A command is plain data: the engine decides how to carry it out, and the
journal records its outcome under the command's position (the n-th leaf
command the run yielded). ``kind`` and ``target`` are what a replay compares
to detect a changed workflow (``NonDeterminismError``).

The command's *class* is its identity in code: the replay and the turn
dispatch on it (``isinstance`` / a table keyed on the class). ``kind`` is
the same identity as the string the journal stores, so it never changes for
a class: a renamed ``kind`` would make every stored journal diverge.

Every command is also awaitable (``Command[R]``: ``R`` is what the body gets
back): ``__await__`` yields the command itself once and returns what the
replay sends back, so ``await ctx.run(...)`` in an ``async def`` body reaches
the same replay loop as ``yield ctx.run(...)`` in a generator body
(``engine.workflow.body``). One command object is one journal position, so
awaiting the same object twice is refused.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, Literal, NoReturn, TypeVar

from weft_django.engine.workflow.body import is_foreign_driver_error, refuse_outside_body
from weft_django.engine.workflow.payload_types import Rebuild

R = TypeVar("R", covariant=True)

LeafKind = Literal[
    "activity", "sleep", "signal", "wait-condition", "async-activity", "child", "signal-workflow"
]
"""The journal's kind for each leaf command (stored; never renamed)."""

CommandKind = LeafKind | Literal["command", "all", "race", "continue-as-new"]


@dataclass(frozen=True)
class Command(Generic[R]):
    kind: ClassVar[CommandKind] = "command"

    def __await__(self) -> Generator[Any, Any, R]:
        # Every await of every body runs this: one dict check, no syscall. Awaited
        # outside a body, the driver (an asyncio task) refuses the command it is
        # handed by throwing into this frame: that becomes the clear error.
        seen = self.__dict__
        if "_awaited" in seen:
            raise RuntimeError(
                f"ctx command {self.describe()!r} was awaited twice: one command is one "
                "journal position; call ctx.run(...) (or the other ctx method) again to "
                "run it again"
            )
        seen["_awaited"] = True
        try:
            return (yield self)
        except RuntimeError as exc:
            if is_foreign_driver_error(exc):
                refuse_outside_body(self)
            raise

    @property
    def target(self) -> str:
        return ""

    def describe(self) -> str:
        return f"{self.kind} {self.target}".strip()


@dataclass(frozen=True)
class RunActivity(Command[R]):
    kind: ClassVar[LeafKind] = "activity"
    name: str
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)
    #: How an ``async def`` body gets the result rebuilt (the activity's return type).
    rebuild: Rebuild | None = field(default=None, compare=False, repr=False)

    @property
    def target(self) -> str:
        return self.name


@dataclass(frozen=True)
class Sleep(Command[None]):
    kind: ClassVar[LeafKind] = "sleep"
    duration_ms: int


@dataclass(frozen=True)
class WaitSignal(Command[R]):
    kind: ClassVar[LeafKind] = "signal"
    name: str
    timeout_ms: int | None = None
    #: ``wait_for_signal(name, type=T)``: how the payload is rebuilt as ``T``.
    rebuild: Rebuild | None = field(default=None, compare=False, repr=False)

    @property
    def target(self) -> str:
        return self.name


@dataclass(frozen=True)
class WaitUntil(Command[bool | None]):
    kind: ClassVar[LeafKind] = "wait-condition"
    predicate: Callable[[], bool]
    timeout_ms: int | None = None


@dataclass(frozen=True)
class StartAsyncActivity(Command[Any]):
    kind: ClassVar[LeafKind] = "async-activity"
    name: str
    is_activity: bool
    args: tuple[Any, ...] = ()
    timeout_ms: int | None = None
    rebuild: Rebuild | None = field(default=None, compare=False, repr=False)

    @property
    def target(self) -> str:
        return self.name


@dataclass(frozen=True)
class StartChild(Command[R]):
    kind: ClassVar[LeafKind] = "child"
    name: str
    input: Any = None
    workflow_id: str | None = None
    #: Not awaited, not cancelled with the parent: the command resolves to the
    #: child's workflow id in the batch that starts it (``turn.detached``).
    detached: bool = False
    #: Flow control of the child's start (``None``: the child workflow's own
    #: ``@workflow(queue=...)``); checked by the start write's ``run_fields``.
    queue: str | None = None
    priority: int = 0
    concurrency_key: str | None = None
    #: The child's declared result type (``None`` for a detached child).
    rebuild: Rebuild | None = field(default=None, compare=False, repr=False)

    @property
    def target(self) -> str:
        return self.name


@dataclass(frozen=True)
class SignalWorkflow(Command[None]):
    """Signal another workflow from a body, once (``turn.signal_workflow``)."""

    kind: ClassVar[LeafKind] = "signal-workflow"
    workflow_id: str
    name: str
    payload: Any = None

    @property
    def target(self) -> str:
        return self.name


LeafCommand = (
    RunActivity[Any]
    | Sleep
    | WaitSignal[Any]
    | WaitUntil
    | StartAsyncActivity
    | StartChild[Any]
    | SignalWorkflow
)
LEAF_COMMANDS: tuple[type[LeafCommand], ...] = (
    RunActivity,
    Sleep,
    WaitSignal,
    WaitUntil,
    StartAsyncActivity,
    StartChild,
    SignalWorkflow,
)
"""The commands a body may wait on (alone or in ``ctx.all``/``ctx.race``)."""
LEAF_KINDS: frozenset[str] = frozenset(command.kind for command in LEAF_COMMANDS)


@dataclass(frozen=True)
class All(Command[R]):
    """Wait for every command (``ctx.all``, ``ctx.map``); results in command order.

    ``return_exceptions``: failures are values of the result list (like
    ``asyncio.gather``) instead of the first one cancelling the rest and
    being raised. ``max_concurrency``: at most this many members are open
    at once -- the first ones in command order, so which run is fixed by the
    journal, not by timing.
    """

    kind: ClassVar[Literal["all"]] = "all"
    commands: tuple[AwaitableCommand, ...]
    return_exceptions: bool = False
    max_concurrency: int | None = None
    #: ``await ctx.all(...)`` returns a tuple (``ctx.map``: a list); a
    #: generator body that yields it gets the list either way.
    tupled: bool = field(default=False, compare=False, repr=False)

    def __await__(self) -> Generator[Any, Any, R]:
        values = yield from super().__await__()
        return tuple(values) if self.tupled else values  # type: ignore[arg-type,return-value]


@dataclass(frozen=True)
class Race(Command[R]):
    """Wait for the first command to finish: ``(index, value)``; the rest are cancelled."""

    kind: ClassVar[Literal["race"]] = "race"
    commands: tuple[AwaitableCommand, ...]


GroupCommand = All[Any] | Race[Any]
AwaitableCommand = LeafCommand | GroupCommand
"""What a body may yield and wait on; groups nest to any depth."""


@dataclass(frozen=True)
class ContinueAsNew(Command[NoReturn]):
    kind: ClassVar[CommandKind] = "continue-as-new"
    input: Any = None


def _identity_hash(self: object) -> int:
    return object.__hash__(self)


# A command is hashed by identity: it is one journal position, and its fields
# (kwargs, an input) may be unhashable -- so ``asyncio.gather(ctx.run(...))``
# reaches the refusal that names it instead of failing on ``hash``.
for _cls in (Command, *LEAF_COMMANDS, All, Race, ContinueAsNew):
    _cls.__hash__ = _identity_hash  # type: ignore[method-assign,assignment]
