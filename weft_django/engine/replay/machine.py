"""Drive a workflow generator against its journal (SPEC §1 "Model").

The journal is a sequence of events in the order they were recorded:
completions of leaf commands (keyed by the command's position — the n-th
leaf command the run yielded), signal deliveries to ``on_signal`` handlers,
and recorded values (``now``, ``uuid``, ``random``, ``patch``). A replay
re-runs the generator from the start: while the body is blocked on a
command, the next recorded event is applied; when the events run out, the
replay has reached the *frontier* and reports which commands are still
open. The engine acts on them and feeds each new event back with
``apply``. Nothing here touches the database — the body runs with database
access refused — so ``client.query`` can replay read-only anywhere.

``Replay`` is the ``WorkflowRuntime`` that ``ctx`` declares: this module
imports the context, never the reverse. The tree of one yield (leaves and groups,
how a group is decided) is ``branches``, the journal entries it reads and the
outcomes it answers are ``events``.

Over 400 lines: one state machine (``Replay``), read as one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from weft_django.engine.replay.branches import (
    Group,
    Leaf,
    Node,
    abandon,
    delivered,
    eligible,
    settle_empty,
    settle_parent,
)
from weft_django.engine.replay.errors_codec import error_record, rebuild_error
from weft_django.engine.replay.events import (
    INFO_KINDS,
    SIDE_EFFECT_KINDS,
    ContinuedAsNew,
    Diverged,
    Event,
    Failed,
    Finished,
    Frontier,
    Outcome,
)
from weft_django.engine.replay.sandbox import (
    WorkflowDatabaseAccessError as WorkflowDatabaseAccessError,
)
from weft_django.engine.replay.sandbox import close_body, database_refused, json_copy
from weft_django.engine.replay.typed import rebuilt
from weft_django.engine.replay.updates import UpdateRun, call_handler, done_fields, start_args
from weft_django.engine.workflow.body import as_body, foreign_await_error, is_coroutine
from weft_django.engine.workflow.commands import (
    LEAF_COMMANDS,
    All,
    Command,
    ContinueAsNew,
    Race,
    WaitSignal,
    WaitUntil,
)
from weft_django.engine.workflow.context import SideEffectKind, WorkflowContext
from weft_django.engine.workflow.definitions import WorkflowDefinition
from weft_django.engine.workflow.patches import DEPRECATED_MARKER, is_deprecated_marker
from weft_django.errors import NonDeterminismError, PayloadTypeMismatch, WorkflowCancelled


class _Divergence(BaseException):
    """Escapes user ``except Exception`` blocks inside the body."""

    def __init__(self, error: NonDeterminismError) -> None:
        super().__init__(str(error))
        self.error = error


class Replay:
    """One body -- a generator or an ``async def`` coroutine, both driven by
    ``send``/``throw`` -- driven against one run's journal."""

    def __init__(
        self,
        definition: WorkflowDefinition,
        *,
        workflow_id: str,
        run_id: str,
        input: Any,
        events: list[Event],
        clock_ms: Callable[[], int],
        record: bool = True,
        replayed_commands: int = 0,
    ) -> None:
        self.definition = definition
        self.workflow_id = workflow_id
        self.events = list(events)
        self._clock_ms = clock_ms
        self.record = record  # False for read-only queries
        # How many leaf commands the body had yielded when an earlier turn
        # parked it: body code that runs before yielding that many commands
        # already ran (and logged) once, even past the last journal event.
        self.replayed_commands = replayed_commands
        self.pos = 0
        # Events already applied and dropped (``_compact``): ``events`` holds
        # only what is not applied yet, so a cached replay keeps no history.
        self._base = 0
        self._recorded = len(self.events)  # events that existed before this replay
        self.new_events: list[Event] = []
        # Leaves of the node the body is blocked on; a resumed node's leaves
        # are dropped, so nothing here grows with the history.
        self.leaves: dict[int, Leaf] = {}
        self._abandoned: list[Leaf] = []
        self._next_command = 0
        self._blocked: Node | None = None
        self._outcome: Outcome | None = None
        self.ctx = WorkflowContext(self, workflow_id, run_id, definition.name)
        self._input = json_copy(input)
        self._gen: Any = None
        # An ``async def`` body: stepped with ``BODY_LOOP`` running (``engine.workflow.body``).
        self._coro = definition.is_async
        # Set once a ``cancel`` event was applied: the body is cleaning up, and
        # however it ends the run ends ``cancelled`` (``failed`` if it raised
        # something else). Rebuilt by replay, like everything here.
        self.cancelled: WorkflowCancelled | None = None
        # Update handlers delivered and not answered yet (``engine.update_handlers``).
        self.updates: list[UpdateRun] = []

    def __del__(self) -> None:
        """Close the body quietly when this replay is dropped (``sandbox.close_body``)."""
        gen, self._gen = getattr(self, "_gen", None), None
        close_body(gen)

    # -- state ---------------------------------------------------------------
    @property
    def is_replaying(self) -> bool:
        if not self.record:
            return True  # a read-only query only re-runs history
        if self._next_command < self.replayed_commands:
            return True
        return self.pos < self._recorded

    def clock_ms(self) -> int:
        return self._clock_ms()

    @property
    def commands_yielded(self) -> int:
        return self._next_command

    @property
    def next_position(self) -> int:
        return self._base + len(self.events)

    def is_live(self, command: int) -> bool:
        """Whether leaf ``command`` is still open (not settled, not abandoned)."""
        leaf = self.leaves.get(command)
        return leaf is not None and leaf.live

    def _diverge(self, position: int, recorded: str, new: str) -> _Divergence:
        return _Divergence(NonDeterminismError(self.workflow_id, position, recorded, new))

    # -- recorded values -----------------------------------------------------
    def side_effect(self, kind: SideEffectKind, target: str, make: Callable[[], Any]) -> Any:
        self._skip_deprecated()
        if self.pos < len(self.events):
            event = self.events[self.pos]
            if event.kind == kind and event.target == target:
                self.pos += 1
                return event.result
            raise self._diverge(event.position, _describe(event), f"{kind} {target}".strip())
        value = json_copy(make())
        self._append(Event(self.next_position, kind, None, target, value))
        return value

    def patched(self, change_id: str) -> bool:
        self._skip_deprecated(keep=change_id)
        if self.pos < len(self.events):
            event = self.events[self.pos]
            if event.kind == "patch" and event.target == change_id:
                self.pos += 1
                return True
            return False  # this run passed here before the change: keep the old path
        self._append(Event(self.next_position, "patch", None, change_id, True))
        return True

    def deprecate_patch(self, change_id: str) -> None:
        """The patch is always taken now (``engine.patches``): consume this run's
        marker if it recorded one here, record a deprecated one if live."""
        self._skip_deprecated(keep=change_id)
        if self.pos < len(self.events):
            event = self.events[self.pos]
            if event.kind == "patch" and event.target == change_id:
                self.pos += 1
            return  # no marker: this run passed here before the change (new path anyway)
        self._append(Event(self.next_position, "patch", None, change_id, DEPRECATED_MARKER))

    def _skip_deprecated(self, keep: str | None = None) -> None:
        """Step over deprecated markers no call stands at (their call was removed),
        except one of ``keep`` (the call being made)."""
        while self.pos < len(self.events):
            event = self.events[self.pos]
            if not is_deprecated_marker(event.kind, event.result) or event.target == keep:
                return
            self.pos += 1

    def _append(self, event: Event) -> None:
        self.events.append(event)
        self.pos += 1
        if self.record:
            self.new_events.append(event)

    def take_new_events(self) -> list[Event]:
        """Recorded values produced live since the last call (to commit next)."""
        taken, self.new_events = self.new_events, []
        return taken

    # -- driving -------------------------------------------------------------
    def advance(self) -> Outcome:
        """Run until the body finishes or blocks with nothing left to apply."""
        if self._outcome is not None:
            return self._outcome
        # The body and its handlers run only inside ``advance``: the database is
        # refused once here, not per step; a coroutine body also runs with
        # ``BODY_LOOP`` (set after the refusal, which resolves the thread's own
        # connections: ``engine.workflow.body``).
        with database_refused():
            if self._coro:
                return as_body(self._advance)  # type: ignore[no-any-return]
            return self._advance()

    def _advance(self) -> Outcome:
        try:
            if self._gen is None:
                self._start()
            while self._outcome is None:
                blocked = self._blocked
                assert blocked is not None
                if not blocked.settled:
                    self._skip_deprecated()
                    if self.pos < len(self.events):
                        self._apply_event(self.events[self.pos])
                        self.pos += 1
                        if self.updates:
                            self._run_updates()
                        continue
                    self._compact()
                    return Frontier(self._open_leaves())
                self._resume(blocked)
        except _Divergence as divergence:
            self._outcome = Diverged(divergence.error)
        assert self._outcome is not None
        return self._outcome

    def apply(self, event: Event) -> None:
        """Feed an event the engine just committed (live)."""
        self.events.append(event)

    def cancel_event(self, reason: str) -> Event:
        """The ``cancel`` event to record at the frontier (the engine commits
        it, then ``apply``s it): the blocked wait raises ``WorkflowCancelled``."""
        return Event(self.next_position, "cancel", None, "", {"reason": reason})

    def _compact(self) -> None:
        """At the frontier every event is applied: drop them (positions stay)."""
        applied = self.pos
        if applied == 0:
            return
        del self.events[:applied]
        self._base += applied
        self._recorded = max(0, self._recorded - applied)
        self.pos = 0

    def _open_leaves(self) -> list[Leaf]:
        """The leaves the engine should act on now, in command order: the live
        leaves under the blocked node, at most ``max_concurrency`` live members
        of a group open at once (the first ones)."""
        blocked = self._blocked
        if blocked is None or not blocked.live:
            return []
        opened = eligible(blocked)
        for update in self.updates:
            if update.blocked is not None and update.blocked.live:
                opened.extend(eligible(update.blocked))
        return sorted(opened, key=lambda leaf: leaf.id)

    def _start(self) -> None:
        body_input = self._input
        if self.definition.is_async and self.definition.input_rebuild is not None:
            body_input = self._rebuilt(
                self.definition.input_rebuild, body_input, 0, "the workflow input"
            )
        try:
            self._gen = self.definition.fn(self.ctx, body_input)
        except _Divergence:
            raise
        except Exception as exc:
            self._outcome = Failed(error_record(exc, with_traceback=True))
            return
        if not hasattr(self._gen, "send"):
            # A plain function: its return value is the result.
            self._outcome = Finished(json_copy(self._gen))
            return
        if is_coroutine(self._gen) and not self._coro:
            close_body(self._gen)
            self._gen = None
            self._outcome = Failed(
                error_record(
                    TypeError(
                        f"workflow {self.definition.name!r} returned a coroutine from a plain "
                        "function: declare it async def"
                    )
                )
            )
            return
        self._step(lambda: self._gen.send(None))

    def _rebuilt(self, rebuild: Any, value: Any, position: int, what: str) -> Any:
        """``value`` as its declared type (``replay.typed``); a misfit suspends the run."""
        try:
            return rebuilt(
                rebuild, value, workflow_id=self.workflow_id, position=position, what=what
            )
        except PayloadTypeMismatch as mismatch:
            raise _Divergence(mismatch) from None

    def _resume(self, blocked: Node) -> None:
        self._retire(blocked)
        if blocked.error is not None:
            error = blocked.error
            self._step(lambda: self._gen.throw(error))
        else:
            value = delivered(blocked.value)
            self._step(lambda: self._gen.send(value))

    def _retire(self, blocked: Node) -> None:
        """The body moves past ``blocked``: forget its leaves (a late event for
        one is ignored, ``_apply_event``)."""
        for leaf in blocked.leaves() if isinstance(blocked, Group) else [blocked]:
            self.leaves.pop(leaf.id, None)

    def _step(self, action: Callable[[], Any]) -> None:
        while True:
            try:
                yielded = action()
            except StopIteration as stop:
                self._finish(stop.value)
                return
            except _Divergence:
                raise
            except Exception as exc:
                self._outcome = Failed(error_record(exc, with_traceback=True))
                return
            if self._coro and not isinstance(yielded, Command):
                # Awaited something that is not a ctx command: refused where it
                # was awaited, live and on replay alike (nothing recorded).
                action = self._thrower(foreign_await_error(self._gen, yielded))
                continue
            self._register(yielded)
            return

    def _thrower(self, error: BaseException) -> Callable[[], Any]:
        return lambda: self._gen.throw(error)

    def _finish(self, value: Any) -> None:
        remaining = [
            e
            for e in self.events[self.pos :]
            if e.kind not in INFO_KINDS and not is_deprecated_marker(e.kind, e.result)
        ]
        if remaining:
            event = remaining[0]
            raise self._diverge(event.position, _describe(event), "the end of the workflow")
        try:
            self._outcome = Finished(json_copy(value))
        except (TypeError, ValueError) as exc:
            self._outcome = Failed(error_record(exc))

    def _register(self, yielded: Any) -> None:
        if isinstance(yielded, ContinueAsNew):
            self._outcome = ContinuedAsNew(yielded.input)
            return
        if isinstance(yielded, (All, Race, *LEAF_COMMANDS)):
            try:
                blocked = self._new_node(yielded, None)
            except TypeError as exc:
                self._outcome = Failed(error_record(exc))
                return
            self._blocked = blocked
            settle_empty(blocked, self._abandoned)
            return
        self._outcome = Failed(
            {
                "type": "TypeError",
                "message": f"workflow {self.definition.name!r} yielded {yielded!r}, "
                "which is not a ctx command (did you forget ctx.run(...)?)",
            }
        )

    def _new_node(self, command: Any, parent: Group | None) -> Node:
        """Register ``command`` (a leaf, or a group depth-first in command
        order): each leaf takes the next position."""
        if isinstance(command, All | Race):
            group = Group(
                command.kind,
                parent=parent,
                return_exceptions=isinstance(command, All) and command.return_exceptions,
                max_concurrency=command.max_concurrency if isinstance(command, All) else None,
            )
            for member in command.commands:
                group.members.append(self._new_node(member, group))
            return group
        if not isinstance(command, LEAF_COMMANDS):
            raise TypeError(
                f"ctx.all/race/map take ctx commands (or ctx.all/race/map), got {command!r}"
            )
        leaf = Leaf(self._next_command, command, parent)
        self.leaves[leaf.id] = leaf
        self._next_command += 1
        return leaf

    # -- events --------------------------------------------------------------
    def _apply_event(self, event: Event) -> None:
        if event.kind == "signal-handler":
            self._deliver_signal(event.target, event.result)
            return
        if event.kind == "cancel":
            self._cancel_blocked(event)
            return
        if event.kind == "update":
            self.updates.append(self._start_update(event))
            return
        if event.kind in SIDE_EFFECT_KINDS:
            raise self._diverge(event.position, _describe(event), "a blocked workflow")
        leaf = self.leaves.get(event.command) if event.command is not None else None
        if leaf is None and event.command is not None and 0 <= event.command < self._next_command:
            return  # a command the body moved past (a race's loser, a failed all's rest)
        if leaf is None:
            raise self._diverge(
                event.command if event.command is not None else event.position,
                _describe(event),
                "no such command",
            )
        if event.target != leaf.command.target or (
            event.kind not in INFO_KINDS and event.kind != leaf.command.kind
        ):
            raise self._diverge(leaf.id, _describe(event), leaf.command.describe())
        if event.kind in INFO_KINDS:
            leaf.info[event.kind] = event.result
            return
        if not leaf.live:
            return
        leaf.settled = True
        if event.error is not None:
            leaf.error = rebuild_error(event.error)
        else:
            # An ``async def`` body gets values rebuilt as declared; a
            # generator body keeps getting the stored JSON (its contract).
            rebuild = getattr(leaf.command, "rebuild", None) if self._coro else None
            leaf.value = event.result
            if rebuild is not None and not (
                event.result is None and isinstance(leaf.command, WaitSignal)
            ):
                what = f"the result of {leaf.command.describe()}"
                leaf.value = self._rebuilt(rebuild, event.result, event.position, what)
        settle_parent(leaf, self._abandoned)

    def _cancel_blocked(self, event: Event) -> None:
        """A cancel with a grace reached the body: its blocked wait is
        abandoned (timers dropped, attempts discarded, children left to their
        own cancel) and settles with ``WorkflowCancelled``, which the body
        receives where it waits. A second ``cancel`` event cannot be recorded
        (the engine delivers once), so one found here is ignored."""
        if self.cancelled is not None:
            return
        reason = event.result.get("reason", "") if isinstance(event.result, dict) else ""
        self.cancelled = WorkflowCancelled(self.workflow_id, str(reason))
        blocked = self._blocked
        assert blocked is not None and blocked.live
        abandon(blocked, self._abandoned)
        blocked.settled = True
        blocked.error = self.cancelled

    def _deliver_signal(self, name: str, payload: Any) -> None:
        handler = self.ctx.signal_handlers.get(name)
        if handler is None:
            return
        handler(json_copy(payload))

    # -- updates (``engine.update_handlers``) -------------------------------
    def _start_update(self, event: Event) -> UpdateRun:
        update_id, args = start_args(event.result)
        entry = self.ctx.update_handlers.get(event.target)
        try:
            return call_handler(
                self.workflow_id, event.target, update_id, entry, args, typed=self._coro
            )
        except PayloadTypeMismatch as mismatch:  # its arguments no longer fit
            raise _Divergence(
                PayloadTypeMismatch(
                    self.workflow_id, event.position, mismatch.recorded, mismatch.new
                )
            ) from None

    def _run_updates(self) -> None:
        """Step every delivered handler as far as it goes, and record the
        answer of each that ended -- right after the event that ended it, live
        and on replay alike, so its ``update-done`` entry replays in place."""
        progressed = True
        while progressed:
            progressed = False
            for update in list(self.updates):
                if update.outcome is None:
                    blocked = update.blocked
                    if blocked is not None and not blocked.settled:
                        continue
                    if blocked is not None:
                        self._retire(blocked)
                    yielded = update.step() if update.gen is not None else None
                    if yielded is not None:
                        try:
                            node = self._new_node(yielded, None)
                        except TypeError as exc:
                            update.outcome = ("error", error_record(exc))
                        else:
                            update.blocked = node
                            settle_empty(node, self._abandoned)
                            progressed = True
                            continue
                self.updates.remove(update)
                self._record_done(update)
                progressed = True

    def _record_done(self, update: UpdateRun) -> None:
        self._skip_deprecated()
        if self.pos < len(self.events):
            event = self.events[self.pos]
            if event.kind == "update-done" and event.target == update.update_id:
                self.pos += 1
                return
            raise self._diverge(event.position, _describe(event), f"update-done {update.update_id}")
        result, error = done_fields(update)
        done = Event(self.next_position, "update-done", None, update.update_id, result, error)
        self._append(done)

    def evaluate(self, command: WaitUntil) -> bool:
        """Evaluate a ``wait_until`` predicate (database access refused)."""
        with database_refused():
            return bool(command.predicate())

    def take_abandoned(self) -> list[Leaf]:
        """Leaves abandoned since the last call (their children to cancel,
        their running attempts to drop)."""
        taken, self._abandoned = self._abandoned, []
        return taken


def _describe(event: Event) -> str:
    return f"{event.kind} {event.target}".strip()
