"""Sagas: compensations registered after each step, run in reverse.

Why no state of its own: a ``Saga`` is a list the body fills as it runs
(``saga.add`` right after a step succeeded), so a replay of the body rebuilds
exactly the same list from the journal; and ``compensate`` only yields
ordinary activity commands, each recorded -- and retried under its own
policy -- like any other. Nothing here is written anywhere, so a takeover in
the middle of compensating replays the compensations already done (from the
journal) and goes on with the next one.

Every compensation is tried even when an earlier one failed for good; the
failures are reported together afterwards (``SagaCompensationError`` with
each compensation's outcome), so one stuck refund never hides a stock
release that did not happen.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from weft_django.engine.workflow.commands import RunActivity
from weft_django.engine.workflow.definitions import activity_definition
from weft_django.errors import SagaCompensationError, WorkflowCancelled

CompensationStatus = Literal["ok", "failed"]


class _Context(Protocol):
    """What a saga needs from ``ctx``: the workflow's id."""

    @property
    def workflow_id(self) -> str: ...


class Compensating:
    """What ``saga.compensate()`` returns: ``await`` it in an ``async def`` body,
    ``yield from`` it in a generator body -- the same steps either way."""

    def __init__(self, steps: Generator[RunActivity[Any], Any, list[dict[str, Any]]]) -> None:
        self._steps = steps

    def __iter__(self) -> Generator[RunActivity[Any], Any, list[dict[str, Any]]]:
        return self._steps

    def __await__(self) -> Generator[Any, Any, list[dict[str, Any]]]:
        return self._steps


@dataclass(frozen=True)
class Compensation:
    """One registered compensation: an activity and its arguments."""

    activity: str
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)


@dataclass
class Saga:
    """``saga = ctx.saga()``; ``saga.add(undo, *args)`` after each step;
    ``await saga.compensate()`` (``yield from`` in a generator body) on
    failure or cancellation."""

    ctx: _Context
    compensations: list[Compensation] = field(default_factory=list)

    def add(self, compensation: Any, *args: Any, **kwargs: Any) -> None:
        """Register ``compensation`` (an ``@activity`` or its name) to undo the
        step that just succeeded. Checked now, so a typo fails at the ``add``,
        not in the middle of compensating."""
        definition = activity_definition(compensation)
        if definition is None:
            raise TypeError(
                f"saga.add() needs an @activity function or its name, got {compensation!r}"
            )
        self.compensations.append(Compensation(definition.name, tuple(args), dict(kwargs)))

    def compensate(self) -> Compensating:
        """Run every compensation, last added first, one at a time.

        Returns each one's outcome (``{"compensation", "status", "error"}``,
        in the order they ran); raises ``SagaCompensationError`` with them
        when any failed for good. The compensations run are removed, so a
        second ``compensate()`` does not run them again.
        """
        return Compensating(self._steps())

    def _steps(self) -> Generator[RunActivity[Any], Any, list[dict[str, Any]]]:
        outcomes: list[dict[str, Any]] = []
        while self.compensations:
            step = self.compensations.pop()
            try:
                yield RunActivity(step.activity, step.args, dict(step.kwargs))
            except WorkflowCancelled:
                # A cancel with a grace interrupted this compensation (its
                # attempt was discarded): run it again, within the grace.
                self.compensations.append(step)
                continue
            except Exception as exc:  # the activity failed for good (its retries are spent)
                outcomes.append(_outcome(step, "failed", str(exc)))
            else:
                outcomes.append(_outcome(step, "ok", None))
        if any(o["status"] != "ok" for o in outcomes):
            raise SagaCompensationError(self.ctx.workflow_id, outcomes)
        return outcomes


def _outcome(step: Compensation, status: CompensationStatus, error: str | None) -> dict[str, Any]:
    return {"compensation": step.activity, "status": status, "error": error}


__all__ = ["Compensating", "Compensation", "CompensationStatus", "Saga"]
