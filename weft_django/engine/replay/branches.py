"""The tree of one yield: its leaf commands and groups, and how a group is decided.

A body blocks on exactly one node at a time -- a leaf command, or a ``ctx.all`` /
``ctx.race`` / ``ctx.map`` whose members are leaves or groups, to any depth. Which leaves
are open (``eligible``, with a group's ``max_concurrency`` counted in command order), when a
group is decided (``decide``: a race by its first settled member, an all by its first
failure unless ``return_exceptions``, else by every member) and what is cancelled then
(``abandon``: the live rest, recursively) follow from the tree alone -- never from timing
-- so a replay of the same journal decides the same way. ``Replay`` feeds events to leaves
and asks this module the rest.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from weft_django.engine.workflow.commands import LeafCommand

__all__ = [
    "Group",
    "Leaf",
    "Node",
    "abandon",
    "decide",
    "delivered",
    "eligible",
    "settle_empty",
    "settle_parent",
]


@dataclass
class Leaf:
    """An open or settled leaf command of this replay."""

    id: int
    command: LeafCommand
    group: Group | None = None
    settled: bool = False
    value: Any = None
    error: BaseException | None = None
    abandoned: bool = False
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def live(self) -> bool:
        return not self.settled and not self.abandoned


@dataclass
class Group:
    """A ``ctx.all`` / ``ctx.race`` / ``ctx.map``: members are leaves or groups."""

    kind: Literal["all", "race"]
    members: list[Leaf | Group] = field(default_factory=list)
    parent: Group | None = None
    return_exceptions: bool = False
    max_concurrency: int | None = None
    settled: bool = False
    abandoned: bool = False
    value: Any = None
    error: BaseException | None = None

    @property
    def live(self) -> bool:
        return not self.settled and not self.abandoned

    def leaves(self) -> list[Leaf]:
        """Every leaf of this group's tree, depth-first in command order."""
        found: list[Leaf] = []
        for member in self.members:
            if isinstance(member, Group):
                found.extend(member.leaves())
            else:
                found.append(member)
        return found


Node = Leaf | Group


def settle_parent(node: Node, abandoned: list[Leaf]) -> None:
    """``node`` settled: settle its group when that decides it, upwards.

    ``race``: the first member to settle decides, ``(index, value)`` or
    its error. ``all``: the first failure decides (the rest are
    abandoned) unless ``return_exceptions``; otherwise every member.
    """
    group = node.parent if isinstance(node, Group) else node.group
    if group is not None and group.live and decide(group, abandoned):
        settle_parent(group, abandoned)


def decide(group: Group, abandoned: list[Leaf]) -> bool:
    """Settle ``group`` if its settled members decide it (and abandon the
    rest). Called as each member settles, so the first settled member in
    command order is the one that just settled (or, for groups that are
    settled when yielded -- empty ones -- the first of them)."""
    settled = [(index, m) for index, m in enumerate(group.members) if m.settled]
    if group.kind == "race" and group.members:
        if not settled:
            return False
        index, first = settled[0]
        if first.error is not None:
            group.error = first.error
        else:
            group.value = (index, first.value)
    else:
        failed = [m for _, m in settled if m.error is not None]
        if failed and not group.return_exceptions:
            group.error = failed[0].error
        elif len(settled) == len(group.members):
            group.value = [m.error if m.error is not None else m.value for m in group.members]
        else:
            return False
    group.settled = True
    for member in group.members:
        if member.live:
            abandon(member, abandoned)
    return True


def settle_empty(node: Node, abandoned: list[Leaf]) -> None:
    """Settle the groups of a just-yielded tree that are decided already
    (an empty ``ctx.all()``, a race over one), bottom-up."""
    if isinstance(node, Group):
        for member in node.members:
            settle_empty(member, abandoned)
        if node.live:
            decide(node, abandoned)


def abandon(node: Node, abandoned: list[Leaf]) -> None:
    """Cancel ``node`` and its live subtree (a lost race, a failed all)."""
    if isinstance(node, Group):
        node.abandoned = True
        for member in node.members:
            if member.live:
                abandon(member, abandoned)
        return
    node.abandoned = True
    abandoned.append(node)


def eligible(node: Node) -> list[Leaf]:
    if isinstance(node, Leaf):
        return [node] if node.live else []
    if not node.live:
        return []
    open_leaves: list[Leaf] = []
    budget = node.max_concurrency
    for member in node.members:
        if not member.live:
            continue
        if budget is not None:
            if budget == 0:
                break
            budget -= 1
        open_leaves.extend(eligible(member))
    return open_leaves


_IMMUTABLE = (str, int, float, bool, type(None))


def delivered(value: Any) -> Any:
    """What the body receives: a private copy (JSON containers are copied,
    scalars are immutable; an error of ``return_exceptions`` stays the
    exception; a value rebuilt as its declared type (``replay.typed``) is
    already the body's own; a race's result is the tuple ``(index, value)``)."""
    if isinstance(value, (*_IMMUTABLE, BaseException)):
        return value
    if isinstance(value, tuple):
        return tuple(delivered(item) for item in value)
    if isinstance(value, list):
        return [delivered(item) for item in value]
    if isinstance(value, dict):
        return {key: delivered(item) for key, item in value.items()}
    return value
