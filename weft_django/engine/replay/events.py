"""What the replay machine reads and answers: a journal entry as the replay sees it
(``Event`` and the kinds of entry) and the outcome of a replay (``Frontier``,
``Finished``, ``Failed``, ``ContinuedAsNew``, ``Diverged``). Plain data, no behaviour:
the journal, the turn and the deploy gate share them with ``machine``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from weft_django.engine.replay.branches import Leaf
from weft_django.engine.workflow.commands import LeafKind
from weft_django.engine.workflow.context import SideEffectKind
from weft_django.errors import NonDeterminismError

RecordedKind = SideEffectKind | Literal["patch"]
InfoKind = Literal["async-token", "async-handout"]
EventKind = (
    LeafKind
    | RecordedKind
    | InfoKind
    | Literal["signal-handler", "cancel", "update", "update-done"]
)
"""What a journal entry records: a leaf command's outcome, a recorded value, a
note about a leaf (its async token, its hand-out), a signal handler's delivery,
the delivery of a cancel with a grace (``WorkflowCancelled`` at that point),
an update's delivery to its handler and the handler's answer (``engine.updates``)."""

SIDE_EFFECT_KINDS: frozenset[str] = frozenset({"now", "uuid", "random", "patch"})
INFO_KINDS: frozenset[str] = frozenset({"async-token", "async-handout"})


@dataclass
class Event:
    """One journal entry as the replay sees it."""

    position: int
    kind: EventKind
    command: int | None = None
    target: str = ""
    result: Any = None
    error: Any = None


@dataclass(frozen=True)
class Frontier:
    """The body is blocked; these leaves are open and need the engine."""

    open: list[Leaf]


@dataclass(frozen=True)
class Finished:
    result: Any


@dataclass(frozen=True)
class Failed:
    error: dict[str, Any]


@dataclass(frozen=True)
class ContinuedAsNew:
    input: Any


@dataclass(frozen=True)
class Diverged:
    """The code no longer matches the journal (the run is suspended)."""

    error: NonDeterminismError


Outcome = Frontier | Finished | Failed | ContinuedAsNew | Diverged


__all__ = [
    "INFO_KINDS",
    "SIDE_EFFECT_KINDS",
    "ContinuedAsNew",
    "Diverged",
    "Event",
    "EventKind",
    "Failed",
    "Finished",
    "Frontier",
    "InfoKind",
    "Outcome",
    "RecordedKind",
]
