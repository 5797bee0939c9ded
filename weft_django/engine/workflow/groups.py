"""``ctx.all`` / ``ctx.race`` / ``ctx.map``: groups of commands, typed.

A group is plain data (``commands.All`` / ``commands.Race``) over leaf
commands or other groups; how the replay decides it is ``engine.replay.branches``.
The overloads here only tell a type checker what ``await`` gives back: a tuple
of each member's result for ``ctx.all`` (a generator body that yields it gets
the same values as a list), ``(index, value)`` for ``ctx.race``, a list for
``ctx.map``. Every argument is checked at the call, before anything is
recorded, with the bad value named.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Literal, TypeVar, overload

from weft_django.engine.workflow.commands import (
    LEAF_COMMANDS,
    All,
    AwaitableCommand,
    Race,
    RunActivity,
)
from weft_django.engine.workflow.definitions import activity_definition

T = TypeVar("T")
T1 = TypeVar("T1")
T2 = TypeVar("T2")
T3 = TypeVar("T3")
T4 = TypeVar("T4")
T5 = TypeVar("T5")
A = TypeVar("A")


def _awaitables(what: str, commands: tuple[Any, ...]) -> tuple[AwaitableCommand, ...]:
    for command in commands:
        if not isinstance(command, (All, Race, *LEAF_COMMANDS)):
            raise TypeError(
                f"{what}() takes ctx commands (ctx.run, ctx.sleep, ..., or ctx.all/race/map), "
                f"got {command!r}"
            )
    return tuple(commands)


class GroupMethods:
    """The group methods of ``ctx`` (``WorkflowContext`` inherits them)."""

    @overload
    def all(self, *, return_exceptions: Literal[False] = False) -> All[tuple[()]]: ...
    @overload
    def all(
        self, c1: Awaitable[T1], /, *, return_exceptions: Literal[False] = False
    ) -> All[tuple[T1]]: ...
    @overload
    def all(
        self, c1: Awaitable[T1], c2: Awaitable[T2], /, *, return_exceptions: Literal[False] = False
    ) -> All[tuple[T1, T2]]: ...
    @overload
    def all(
        self,
        c1: Awaitable[T1],
        c2: Awaitable[T2],
        c3: Awaitable[T3],
        /,
        *,
        return_exceptions: Literal[False] = False,
    ) -> All[tuple[T1, T2, T3]]: ...
    @overload
    def all(
        self,
        c1: Awaitable[T1],
        c2: Awaitable[T2],
        c3: Awaitable[T3],
        c4: Awaitable[T4],
        /,
        *,
        return_exceptions: Literal[False] = False,
    ) -> All[tuple[T1, T2, T3, T4]]: ...
    @overload
    def all(
        self,
        c1: Awaitable[T1],
        c2: Awaitable[T2],
        c3: Awaitable[T3],
        c4: Awaitable[T4],
        c5: Awaitable[T5],
        /,
        *,
        return_exceptions: Literal[False] = False,
    ) -> All[tuple[T1, T2, T3, T4, T5]]: ...
    @overload
    def all(
        self, *commands: Awaitable[Any], return_exceptions: bool = False
    ) -> All[tuple[Any, ...]]: ...
    def all(self, *commands: Any, return_exceptions: bool = False) -> All[Any]:
        """Run ``commands`` at once; their results in command order (a tuple).

        The first failure cancels the rest (timers dropped, children
        cancelled, running activities' results discarded) and is raised;
        with ``return_exceptions=True`` every outcome is returned, failures
        as exception values (like ``asyncio.gather``). Commands may be
        ``ctx.all``/``ctx.race``/``ctx.map`` themselves, to any depth.
        """
        return All(
            _awaitables("ctx.all", commands),
            return_exceptions=bool(return_exceptions),
            tupled=True,
        )

    @overload
    def race(self, c1: Awaitable[T1], /) -> Race[tuple[int, T1]]: ...
    @overload
    def race(self, c1: Awaitable[T1], c2: Awaitable[T2], /) -> Race[tuple[int, T1 | T2]]: ...
    @overload
    def race(
        self, c1: Awaitable[T1], c2: Awaitable[T2], c3: Awaitable[T3], /
    ) -> Race[tuple[int, T1 | T2 | T3]]: ...
    @overload
    def race(
        self, c1: Awaitable[T1], c2: Awaitable[T2], c3: Awaitable[T3], c4: Awaitable[T4], /
    ) -> Race[tuple[int, T1 | T2 | T3 | T4]]: ...
    @overload
    def race(self, *commands: Awaitable[Any]) -> Race[tuple[int, Any]]: ...
    def race(self, *commands: Any) -> Race[Any]:
        """Run ``commands`` at once; ``(index, value)`` of the first to finish
        (or its error, raised); the others are cancelled."""
        if not commands:
            raise ValueError("ctx.race() needs at least one command")
        return Race(_awaitables("ctx.race", commands))

    @overload
    def map(  # type: ignore[overload-overlap]
        self,
        activity: Callable[[A], Awaitable[T]],
        iterable: Iterable[A],
        max_concurrency: int | None = None,
        *,
        return_exceptions: Literal[False] = False,
    ) -> All[list[T]]: ...
    @overload
    def map(
        self,
        activity: Callable[[A], T],
        iterable: Iterable[A],
        max_concurrency: int | None = None,
        *,
        return_exceptions: Literal[False] = False,
    ) -> All[list[T]]: ...
    @overload
    def map(
        self,
        activity: Any,
        iterable: Iterable[Any],
        max_concurrency: int | None = None,
        *,
        return_exceptions: bool = False,
    ) -> All[list[Any]]: ...
    def map(
        self,
        activity: Any,
        iterable: Iterable[Any],
        max_concurrency: int | None = None,
        *,
        return_exceptions: bool = False,
    ) -> All[list[Any]]:
        """``activity(item)`` for every item of ``iterable``, at most
        ``max_concurrency`` at once (the first ones in order); results in
        input order (a list). Failures as in ``ctx.all``."""
        definition = activity_definition(activity)
        if definition is None:
            raise TypeError(f"ctx.map() needs an @activity function or its name, got {activity!r}")
        if isinstance(iterable, str | bytes) or not isinstance(iterable, Iterable):
            raise TypeError(
                "ctx.map() needs an iterable of inputs (a str or bytes is refused: "
                f"wrap it in a list), got {iterable!r}"
            )
        if max_concurrency is not None and (
            isinstance(max_concurrency, bool)
            or not isinstance(max_concurrency, int)
            or max_concurrency < 1
        ):
            raise ValueError(
                "ctx.map() max_concurrency must be an integer of at least 1, "
                f"got {max_concurrency!r}"
            )
        commands: tuple[AwaitableCommand, ...] = tuple(
            RunActivity(definition.name, (item,), {}, definition.result_rebuild)
            for item in iterable
        )
        return All(
            commands, return_exceptions=bool(return_exceptions), max_concurrency=max_concurrency
        )


__all__ = ["GroupMethods"]
