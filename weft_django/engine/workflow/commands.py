"""The commands a workflow ``yield``s (SPEC §1 "Commands").

A command is plain data: the engine decides how to carry it out, and the
journal records its outcome under the command's position (the n-th leaf
command the run yielded). ``kind`` and ``target`` are what a replay compares
to detect a changed workflow (``NonDeterminismError``).

The command's *class* is its identity in code: the replay and the turn
dispatch on it (``isinstance`` / a table keyed on the class). ``kind`` is
the same identity as the string the journal stores, so it never changes for
a class: a renamed ``kind`` would make every stored journal diverge.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

LeafKind = Literal[
    "activity", "sleep", "signal", "wait-condition", "async-activity", "child", "signal-workflow"
]
"""The journal's kind for each leaf command (stored; never renamed)."""

CommandKind = LeafKind | Literal["command", "all", "race", "continue-as-new"]


@dataclass(frozen=True)
class Command:
    kind: ClassVar[CommandKind] = "command"

    @property
    def target(self) -> str:
        return ""

    def describe(self) -> str:
        return f"{self.kind} {self.target}".strip()


@dataclass(frozen=True)
class RunActivity(Command):
    kind: ClassVar[LeafKind] = "activity"
    name: str
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)

    @property
    def target(self) -> str:
        return self.name


@dataclass(frozen=True)
class Sleep(Command):
    kind: ClassVar[LeafKind] = "sleep"
    duration_ms: int


@dataclass(frozen=True)
class WaitSignal(Command):
    kind: ClassVar[LeafKind] = "signal"
    name: str
    timeout_ms: int | None = None

    @property
    def target(self) -> str:
        return self.name


@dataclass(frozen=True)
class WaitUntil(Command):
    kind: ClassVar[LeafKind] = "wait-condition"
    predicate: Callable[[], bool]
    timeout_ms: int | None = None


@dataclass(frozen=True)
class StartAsyncActivity(Command):
    kind: ClassVar[LeafKind] = "async-activity"
    name: str
    is_activity: bool
    args: tuple[Any, ...] = ()
    timeout_ms: int | None = None

    @property
    def target(self) -> str:
        return self.name


@dataclass(frozen=True)
class StartChild(Command):
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

    @property
    def target(self) -> str:
        return self.name


@dataclass(frozen=True)
class SignalWorkflow(Command):
    """Signal another workflow from a body, once (``turn.signal_workflow``)."""

    kind: ClassVar[LeafKind] = "signal-workflow"
    workflow_id: str
    name: str
    payload: Any = None

    @property
    def target(self) -> str:
        return self.name


LeafCommand = (
    RunActivity | Sleep | WaitSignal | WaitUntil | StartAsyncActivity | StartChild | SignalWorkflow
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
class All(Command):
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


@dataclass(frozen=True)
class Race(Command):
    """Wait for the first command to finish: ``(index, value)``; the rest are cancelled."""

    kind: ClassVar[Literal["race"]] = "race"
    commands: tuple[AwaitableCommand, ...]


GroupCommand = All | Race
AwaitableCommand = LeafCommand | GroupCommand
"""What a body may yield and wait on; groups nest to any depth."""


@dataclass(frozen=True)
class ContinueAsNew(Command):
    kind: ClassVar[CommandKind] = "continue-as-new"
    input: Any = None
