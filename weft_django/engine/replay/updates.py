"""Running a ``ctx.on_update`` handler inside a replay.

Why a handler is replayed, not just called: it runs in the owner's turn and
may be a generator that yields commands, so a takeover mid-update (the owner
SIGKILLed) must resume it exactly where it was. The ``update`` journal entry
(its name, ``update_id`` and arguments) starts it at the position it was
delivered; its commands take the next command positions like the body's, and
their outcomes are ordinary journal entries; the answer it ends with is the
``update-done`` entry (target: the ``update_id``), recorded right after the
event that ended it. A replay therefore re-runs the same handler the same way
and finds its answer already recorded: an update is applied once, and the
same ``update_id`` always returns the recorded answer.

This module knows nothing of the database; ``Replay`` drives it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from weft_django.engine.replay.branches import Node, delivered
from weft_django.engine.replay.errors_codec import error_record
from weft_django.engine.replay.sandbox import json_copy
from weft_django.engine.replay.typed import rebuilt_args
from weft_django.engine.workflow.body import foreign_await_error, is_coroutine, stepping
from weft_django.engine.workflow.commands import LEAF_COMMANDS, All, Command, Race
from weft_django.engine.workflow.payload_types import RebuildError
from weft_django.errors import PayloadTypeMismatch, UnknownUpdate

UPDATE_EVENT = "update"
DONE_EVENT = "update-done"

Outcome = tuple[Literal["result", "error"], Any]


@dataclass
class UpdateRun:
    """One delivered update: its handler's generator (when it is one), the
    node it is blocked on, and its outcome once it ended."""

    update_id: str
    name: str
    gen: Any = None
    blocked: Node | None = None
    outcome: Outcome | None = None

    def answer(self, value: Any) -> None:
        try:
            self.outcome = ("result", json_copy(value))
        except (TypeError, ValueError) as exc:
            self.outcome = ("error", error_record(exc))

    def step(self) -> Any | None:
        """Resume the generator (or coroutine) past its settled node: the next
        command it yields, or ``None`` once it ended (``outcome`` set)."""
        if is_coroutine(self.gen):
            with stepping():
                return self._step()
        return self._step()

    def _step(self) -> Any | None:
        blocked = self.blocked
        refused: TypeError | None = None
        while True:
            try:
                if refused is not None:
                    yielded = self.gen.throw(refused)
                elif blocked is None:
                    yielded = self.gen.send(None)
                elif blocked.error is not None:
                    yielded = self.gen.throw(blocked.error)
                else:
                    yielded = self.gen.send(delivered(blocked.value))
            except StopIteration as stop:
                self.answer(stop.value)
                return None
            except Exception as exc:
                self.outcome = ("error", error_record(exc, with_traceback=True))
                return None
            if is_coroutine(self.gen) and not isinstance(yielded, Command):
                refused = foreign_await_error(self.gen, yielded)  # as in the body
                continue
            break
        if not isinstance(yielded, (All, Race, *LEAF_COMMANDS)):
            self.gen.close()
            self.outcome = (
                "error",
                {
                    "type": "TypeError",
                    "message": f"update handler {self.name!r} yielded {yielded!r}, "
                    "which is not a ctx command",
                },
            )
            return None
        return yielded


def start_args(payload: Any) -> tuple[str, list[Any]]:
    """``(update_id, args)`` of an ``update`` journal entry's result."""
    data = payload if isinstance(payload, dict) else {}
    args = data.get("args")
    return str(data.get("update_id", "")), list(args) if isinstance(args, list) else []


def update_payload(update_id: str, args: list[Any]) -> dict[str, Any]:
    """The ``update`` journal entry's result (what ``start_args`` reads back)."""
    return {"update_id": update_id, "args": args}


def call_handler(
    workflow_id: str,
    name: str,
    update_id: str,
    entry: tuple[Callable[..., Any], Callable[..., Any] | None] | None,
    args: list[Any],
    *,
    typed: bool = False,
) -> UpdateRun:
    """Call the handler (database access refused by the caller) with its
    arguments rebuilt as it declares them when ``typed`` (the handler of an
    ``async def`` workflow; a generator workflow's gets JSON): a plain function answers at once,
    a generator or coroutine is stepped by the replay."""
    run = UpdateRun(update_id, name)
    if entry is None:
        run.outcome = ("error", error_record(UnknownUpdate(workflow_id, name, [])))
        return run
    where = f"update {name!r}"
    try:
        args = json_copy(args)
        if typed:
            args = rebuilt_args(entry[0], where, args)
    except RebuildError as exc:  # a stored argument that no longer fits its type
        raise PayloadTypeMismatch(
            workflow_id, 0, f"an argument of {where}", f"{exc.path}: {exc.reason}"
        ) from None
    try:
        out = entry[0](*args)
    except Exception as exc:
        run.outcome = ("error", error_record(exc, with_traceback=True))
        return run
    if hasattr(out, "send") and hasattr(out, "throw"):
        run.gen = out
    else:
        run.answer(out)
    return run


def done_fields(run: UpdateRun) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """``(result, error)`` of the ``update-done`` entry that records ``run``'s answer."""
    assert run.outcome is not None
    kind, value = run.outcome
    if kind == "result":
        return {"name": run.name, "result": value}, None
    return {"name": run.name}, value


__all__ = [
    "DONE_EVENT",
    "UPDATE_EVENT",
    "UpdateRun",
    "call_handler",
    "done_fields",
    "start_args",
    "update_payload",
]
