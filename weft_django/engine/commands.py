"""The commands a workflow ``yield``s (SPEC §1 "Commands").

A command is plain data: the engine decides how to carry it out, and the
journal records its outcome under the command's position (the n-th leaf
command the run yielded). ``kind`` and ``target`` are what a replay compares
to detect a changed workflow (``NonDeterminismError``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar


@dataclass(frozen=True)
class Command:
    kind: ClassVar[str] = "command"

    @property
    def target(self) -> str:
        return ""

    def describe(self) -> str:
        return f"{self.kind} {self.target}".strip()


@dataclass(frozen=True)
class RunActivity(Command):
    kind: ClassVar[str] = "activity"
    name: str
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)

    @property
    def target(self) -> str:
        return self.name


@dataclass(frozen=True)
class Sleep(Command):
    kind: ClassVar[str] = "sleep"
    duration_ms: int


@dataclass(frozen=True)
class WaitSignal(Command):
    kind: ClassVar[str] = "signal"
    name: str
    timeout_ms: int | None = None

    @property
    def target(self) -> str:
        return self.name


@dataclass(frozen=True)
class WaitUntil(Command):
    kind: ClassVar[str] = "wait-condition"
    predicate: Callable[[], bool]
    timeout_ms: int | None = None


@dataclass(frozen=True)
class StartAsyncActivity(Command):
    kind: ClassVar[str] = "async-activity"
    name: str
    is_activity: bool
    args: tuple[Any, ...] = ()
    timeout_ms: int | None = None

    @property
    def target(self) -> str:
        return self.name


@dataclass(frozen=True)
class StartChild(Command):
    kind: ClassVar[str] = "child"
    name: str
    input: Any = None
    workflow_id: str | None = None

    @property
    def target(self) -> str:
        return self.name


LeafCommand = RunActivity | Sleep | WaitSignal | WaitUntil | StartAsyncActivity | StartChild
LEAF_KINDS = frozenset({"activity", "sleep", "signal", "wait-condition", "async-activity", "child"})


@dataclass(frozen=True)
class All(Command):
    kind: ClassVar[str] = "all"
    commands: tuple[LeafCommand, ...]


@dataclass(frozen=True)
class Race(Command):
    kind: ClassVar[str] = "race"
    commands: tuple[LeafCommand, ...]


@dataclass(frozen=True)
class ContinueAsNew(Command):
    kind: ClassVar[str] = "continue-as-new"
    input: Any = None
