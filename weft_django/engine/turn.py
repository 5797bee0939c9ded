"""One turn: replay a run, act on its open commands, commit, park or finish.

Every durable write of a turn is ONE fenced conditional batch (SPEC §4.2):
the recorded values and the settling event, the run's state, its timers —
and, at the end, the terminal state with the claim release folded in. No
user code runs inside a transaction or while a row lock is held: an
activity runs first, then its result is committed. If the fence fails the
engine was deposed: ``EngineDeposedError`` ends the turn and the result in
hand is dropped. If the park batch finds that a signal arrived since the
turn read the run (``wake_seq`` moved), the turn goes round again, so a
wake can never fall between "nothing to do" and "parked".
"""

from __future__ import annotations

import logging
import os
import secrets
from typing import TYPE_CHECKING, Any

from django.db.models import F
from django.utils import timezone

from weft_django.engine import signals as weft_signals
from weft_django.engine.commands import RunActivity, StartAsyncActivity, StartChild
from weft_django.engine.definitions import get_activity, get_workflow, has_workflow
from weft_django.engine.errors_codec import error_record
from weft_django.engine.payload import normalize
from weft_django.engine.replay import (
    ContinuedAsNew,
    Diverged,
    Event,
    Failed,
    Finished,
    Leaf,
    Replay,
)
from weft_django.engine.store import (
    RunInbox,
    async_token,
    bump_parent,
    hash_token,
    journal_write,
    load_events,
    load_inbox,
)
from weft_django.errors import (
    ActivityError,
    ActivityErrorKind,
    ChildWorkflowError,
    EngineDeposedError,
    PayloadError,
    UnknownWorkflowType,
    WorkflowTimeoutError,
)
from weft_django.models import AsyncActivity, SignalMessage, Timer, WorkflowRun
from weft_django.ownership.batch import (
    BatchResult,
    Condition,
    Delete,
    Insert,
    RowCondition,
    RunCondition,
    UniqueAbsence,
    Update,
    Write,
)
from weft_django.ownership.fence import fenced_commit
from weft_django.ownership.fold import ClaimFold, prepare_claim_fold
from weft_django.transports import wake_hooks
from weft_django.transports.notify import DONE_CHANNEL, WAKE_CHANNEL, notify_on_commit
from weft_django.warnings import warn_claim_lost

if TYPE_CHECKING:
    from weft_django.engine.engine import Engine

logger = logging.getLogger("weft_django.engine")

DRIVING = frozenset({"running", "parked"})
MAX_STEPS = 100_000


class TurnAborted(Exception):
    """The run changed under the turn (cancelled, suspended, purged)."""


class Turn:
    """Drive one run from its current park point to the next (or to its end)."""

    def __init__(self, engine: Engine, run: WorkflowRun) -> None:
        self.engine = engine
        self.run = run
        self.db = engine.settings.database
        self.version = run.version
        self.wake_seq = run.wake_seq
        self.replay: Replay | None = None
        # The last result when the run ends right after it: recorded by the
        # terminal commit instead of a commit of its own (SPEC §4.2).
        self._folded: tuple[Event, list[Write], list[Condition]] | None = None
        # The inbox of the current step. ``self.wake_seq`` is NOT re-read each
        # step: the value read with the run (before any inbox read) stays a
        # valid lower bound for the park condition — a stale one only makes
        # the park fail and the turn look again (issue #7: one query less a step).
        self._inbox: RunInbox | None = None

    @property
    def _known_timers(self) -> dict[tuple[str, int | None], Timer] | None:
        """The timers the last step read, while no commit since wrote any.

        Only this run's turns write its timers, and this turn holds the claim
        (every commit is fenced), so what it read stays what is stored until
        it writes timers itself — then the next step reads them again. A
        three-step workflow thus reads its timers once, not once per step.
        """
        return self._inbox.__dict__.get("timers") if self._inbox is not None else None

    # -- main loop -------------------------------------------------------------
    def drive(self) -> str:
        """Returns the status the run was left in."""
        for _ in range(MAX_STEPS):
            if self.replay is None:
                try:
                    definition = get_workflow(self.run.name)
                except UnknownWorkflowType as exc:
                    self._stop("suspended", error=error_record(exc), release=True)
                    return "suspended"
                self.replay = Replay(
                    definition,
                    workflow_id=self.run.workflow_id,
                    run_id=str(self.run.pk),
                    input=self.run.input,
                    events=load_events(self.run.pk, self.db),
                    clock_ms=self.engine.now_ms,
                    replayed_commands=self.engine.parked_commands.get(str(self.run.pk), 0),
                )
            outcome = self.replay.advance()
            if isinstance(outcome, Finished):
                self._stop("completed", result=outcome.result, release=True)
                return "completed"
            if isinstance(outcome, Failed):
                self._stop("failed", error=outcome.error, release=True)
                return "failed"
            if isinstance(outcome, Diverged):
                self._stop("suspended", error=error_record(outcome.error), release=True)
                return "suspended"
            if isinstance(outcome, ContinuedAsNew):
                self._continue_as_new(outcome.input)
                continue
            if self.engine.stopping:
                # Shutting down: stop at this checkpoint (all so far is committed)
                # rather than start the next command; the run stays "running" and
                # the next engine recovers it once this one released the claim.
                wid = self.run.workflow_id
                logger.info("turn of %s stopped at a checkpoint: engine stopping", wid)
                return "running"
            inbox = self._inbox = load_inbox(self.run, self.db, self._known_timers)
            if self._progress(outcome.open, inbox):
                continue
            if self._park(outcome.open, inbox):
                return "parked"
            # Something arrived after the wake_seq this turn knows (the park's
            # condition failed): read it again, then look at the inbox again.
            self.wake_seq = self._read_wake_seq()
        raise RuntimeError(f"turn of {self.run.workflow_id} did not settle")

    def _read_wake_seq(self) -> int:
        value = (
            WorkflowRun.objects.using(self.db)
            .filter(pk=self.run.pk)
            .values_list("wake_seq", flat=True)
            .first()
        )
        if value is None:
            raise TurnAborted(self.run.workflow_id)
        return int(value)

    def _still_owner(self) -> None:
        """Before a step runs: stop if this engine already knows the claim is lost.

        Renewal may find the claim gone while the turn is between steps (the
        engine was paused or cut off). The step's result could never be
        recorded — the fence would refuse it — so running it would only be a
        duplicate execution under the next owner. A cheap in-memory check.
        """
        engine = self.engine
        registry = engine.registry
        if engine.ownership != "workflow-lease" or registry is None:
            return
        wid = self.run.workflow_id
        if registry.current_epoch(wid) is None:
            engine.metrics.record_claim_attempt("deposed")
            warn_claim_lost(wid, engine_id=engine.engine_id, during="before-activity")
            raise EngineDeposedError(wid)

    # -- committing --------------------------------------------------------------
    def commit(
        self,
        writes: list[Write],
        events: list[Event] = (),  # type: ignore[assignment]
        *,
        conditions: list[Condition] = (),  # type: ignore[assignment]
        run_values: dict[str, Any] | None = None,
        folds: list[ClaimFold] = (),  # type: ignore[assignment]
        tolerate: bool = False,
        applied: list[Event] = (),  # type: ignore[assignment]
    ) -> BatchResult:
        assert self.replay is not None
        engine = self.engine
        now = engine.now_ms()
        epoch = engine.epoch_for(self.run.workflow_id)
        # ``applied``: events the replay already took in (a settled result it
        # looked past); recorded here, not applied again.
        recorded = [*self.replay.take_new_events(), *applied, *events]
        batch: list[Write] = [
            journal_write(self.run.pk, e, engine_id=engine.engine_id, epoch=epoch, at_ms=now)
            for e in recorded
        ]
        batch.extend(writes)
        values = {
            "version": F("version") + 1,
            "status": "running",
            "turn_started_at": now,
            "turn_pid": os.getpid(),
        }
        values.update(run_values or {})
        batch.append(Update(WorkflowRun, {"pk": self.run.pk}, values))
        status_guard = RunCondition(self.run.pk, statuses=DRIVING, label="run-status")
        result = fenced_commit(
            engine,
            self.run.workflow_id,
            [status_guard, *conditions],
            batch,
            run_id=self.run.pk,
            run_version=self.version,
            folds=folds,
        )
        if result.committed:
            self.version += 1
            if any(_writes_timers(w) for w in batch):
                self._inbox = None  # its timers are no longer what is stored
            for event in events:
                self.replay.apply(event)
            return result
        if result.failed_condition is status_guard:
            raise TurnAborted(self.run.workflow_id)
        if not tolerate:
            raise TurnAborted(f"{self.run.workflow_id}: {result.failed_condition}")
        return result

    def _settle(
        self,
        leaf: Leaf,
        *,
        result: Any = None,
        error: BaseException | None = None,
        writes: list[Write] | None = None,
        conditions: list[Condition] | None = None,
    ) -> bool:
        assert self.replay is not None
        record = error_record(error) if error is not None else None
        event = Event(
            self.replay.next_position,
            leaf.command.kind,
            leaf.id,
            leaf.command.target,
            result,
            record,
        )
        # Only this run's turns write its timers, so when this step read them and
        # none sits at the leaf, there is nothing to delete (one statement less).
        no_timer = self._inbox is not None and self._inbox.has_timer_at(leaf.id) is False
        timers = [] if no_timer else [Delete(Timer, {"run_id": self.run.pk, "position": leaf.id})]
        batch: list[Write] = [*timers, *(writes or [])]
        # Look past the result (the body is deterministic and database-free;
        # no command runs here): if the run ends right after it, the terminal
        # commit records it, so the last result costs no commit of its own.
        self.replay.apply(event)
        if isinstance(self.replay.advance(), Finished | Failed):
            self._folded = (event, batch, list(conditions or []))
            return True
        self.commit(batch, conditions=conditions or [], applied=[event])
        return True

    # -- acting on open commands ---------------------------------------------------
    def _progress(self, open_leaves: list[Leaf], inbox: RunInbox) -> bool:
        assert self.replay is not None
        now = self.engine.now_ms()
        waited = {leaf.command.name for leaf in open_leaves if leaf.command.kind == "signal"}  # type: ignore[union-attr]
        handlers = self.replay.ctx.signal_handlers
        for message in inbox.signals if handlers else ():
            if message.name in self.replay.ctx.signal_handlers and message.name not in waited:
                event = Event(
                    self.replay.next_position, "signal-handler", None, message.name, message.payload
                )
                self.commit(
                    [_consume(message, event.position)],
                    [event],
                    conditions=[
                        RowCondition(SignalMessage, message.pk, {"consumed_at_position": None})
                    ],
                )
                return True
        for leaf in sorted(open_leaves, key=lambda item: item.id):
            if self._act(leaf, inbox, now):
                return True
        return False

    def _act(self, leaf: Leaf, inbox: RunInbox, now: int) -> bool:
        command = leaf.command
        kind = command.kind
        if kind == "signal":
            name = command.name  # type: ignore[union-attr]
            for message in inbox.signals:
                if message.name == name:
                    return self._settle(
                        leaf,
                        result=message.payload,
                        writes=[_consume(message, self.replay.next_position)],  # type: ignore[union-attr]
                        conditions=[
                            RowCondition(SignalMessage, message.pk, {"consumed_at_position": None})
                        ],
                    )
            return self._maybe_timeout(leaf, inbox, now, f"signal {name!r}")
        if kind == "wait-condition":
            assert self.replay is not None
            try:
                satisfied = self.replay.evaluate(leaf)
            except Exception as exc:
                return self._settle(leaf, error=exc)
            if satisfied:
                return self._settle(leaf, result=True)
            return self._maybe_timeout(leaf, inbox, now, "wait_until condition")
        if kind == "sleep":
            timer = inbox.timers.get(("sleep", leaf.id))
            if (timer is not None and timer.fire_at <= now) or command.duration_ms == 0:  # type: ignore[union-attr]
                return self._settle(leaf, result=None)
            return False
        if kind == "activity":
            assert isinstance(command, RunActivity)
            return self._activity(leaf, command.name, command.args, command.kwargs, inbox, now)
        if kind == "async-activity":
            assert isinstance(command, StartAsyncActivity)
            return self._async_activity(leaf, command, inbox, now)
        if kind == "child":
            assert isinstance(command, StartChild)
            return self._child(leaf, command, inbox, now)
        return False

    def _maybe_timeout(self, leaf: Leaf, inbox: RunInbox, now: int, what: str) -> bool:
        timer = inbox.timers.get(("timeout", leaf.id))
        if timer is None or timer.fire_at > now:
            return False
        return self._settle(leaf, error=WorkflowTimeoutError(self.run.workflow_id, what))

    def _activity(
        self,
        leaf: Leaf,
        name: str,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        inbox: RunInbox,
        now: int,
        *,
        on_success: Any = None,
        secret: str | None = None,
    ) -> bool:
        """Run one activity attempt and record its outcome.

        ``secret`` (a hand-out's async token) is cut out of any error text
        before it is stored: the token is only ever stored as its hash.
        """

        def describe(failure: BaseException) -> str:
            text = str(failure)
            return text.replace(secret, "<token>") if secret else text

        timer = inbox.timers.get(("retry", leaf.id))
        if timer is not None and timer.fire_at > now:
            return False
        attempt = int((timer.payload or {}).get("attempt", 1)) if timer is not None else 1
        try:
            definition = get_activity(name)
        except LookupError as exc:
            return self._settle(leaf, error=ActivityError(name, str(exc), kind="non_retryable"))
        self._still_owner()
        outcome = self.engine.run_activity(definition, args, kwargs)
        if outcome.ok:
            try:
                value = normalize(f"result of activity {name!r}", outcome.value)
            except PayloadError as exc:
                return self._settle(
                    leaf,
                    error=ActivityError(
                        name,
                        str(exc),
                        kind="non_retryable",
                        error_type="PayloadError",
                        attempts=attempt,
                    ),
                )
            if on_success is not None:
                return bool(on_success(value))
            return self._settle(leaf, result=value)
        failure = outcome.error
        assert failure is not None
        non_retryable = isinstance(failure, definition.non_retryable)
        if non_retryable or attempt > definition.retries:
            kind: ActivityErrorKind = (
                "timeout" if outcome.timed_out else ("non_retryable" if non_retryable else "error")
            )
            return self._settle(
                leaf,
                error=ActivityError(
                    name,
                    describe(failure),
                    kind=kind,
                    error_type=type(failure).__name__,
                    attempts=attempt,
                ),
            )
        fire_at = self.engine.now_ms() + definition.backoff_for(attempt + 1)
        retry_timer = Timer(
            run_id=self.run.pk,
            position=leaf.id,
            kind="retry",
            fire_at=fire_at,
            engine_id=self.engine.engine_id,
            epoch=self.engine.epoch_for(self.run.workflow_id),
            payload={
                "attempt": attempt + 1,
                "error": f"{type(failure).__name__}: {describe(failure)}"[:500],
            },
        )
        self.commit(
            [
                Delete(Timer, {"run_id": self.run.pk, "position": leaf.id, "kind": "retry"}),
                Insert(retry_timer),
            ],
            run_values={"wake_at": fire_at},
        )
        return True

    def _async_activity(
        self, leaf: Leaf, command: StartAsyncActivity, inbox: RunInbox, now: int
    ) -> bool:
        assert self.replay is not None
        minted = leaf.info.get("async-token")
        if not isinstance(minted, dict):
            nonce = secrets.token_hex(16)
            token = async_token(self.run.pk, leaf.id, nonce)
            event = Event(
                self.replay.next_position, "async-token", leaf.id, command.name, {"nonce": nonce}
            )
            row = AsyncActivity(
                token_hash=hash_token(token),
                run_id=self.run.pk,
                position=leaf.id,
                target=command.name,
            )
            self.commit([Insert(row)], [event])
            return True
        token = async_token(self.run.pk, leaf.id, str(minted.get("nonce")))
        if command.is_activity and "async-handout" not in leaf.info:

            def handed_out(_: Any) -> bool:
                assert self.replay is not None
                event = Event(
                    self.replay.next_position, "async-handout", leaf.id, command.name, None
                )
                self.commit(
                    [Delete(Timer, {"run_id": self.run.pk, "position": leaf.id, "kind": "retry"})],
                    [event],
                )
                return True

            return self._activity(
                leaf,
                command.name,
                (token, *command.args),
                {},
                inbox,
                now,
                on_success=handed_out,
                secret=token,
            )
        settled = inbox.async_rows.get(leaf.id)
        if settled is not None and settled.status == "completed":
            return self._settle(leaf, result=settled.result)
        if settled is not None and settled.status == "failed":
            error = (
                settled.error
                if isinstance(settled.error, dict)
                else {"message": str(settled.error)}
            )
            return self._settle(
                leaf,
                error=ActivityError(
                    command.name,
                    str(error.get("message", "failed")),
                    kind="error",
                    error_type=str(error.get("type") or "AsyncActivityFailed"),
                ),
            )
        timer = inbox.timers.get(("timeout", leaf.id))
        if timer is not None and timer.fire_at <= now:
            expire = Update(
                AsyncActivity,
                {"run_id": self.run.pk, "position": leaf.id, "status": "pending"},
                {"status": "expired"},
            )
            return self._settle(
                leaf,
                error=WorkflowTimeoutError(
                    self.run.workflow_id, f"async activity {command.name!r}"
                ),
                writes=[expire],
            )
        return False

    def _child(self, leaf: Leaf, command: StartChild, inbox: RunInbox, now: int) -> bool:
        child = inbox.children.get(leaf.id)
        child_id = command.workflow_id or f"{self.run.workflow_id}:{leaf.id}"
        if child is None:
            if not has_workflow(command.name):
                return self._settle(
                    leaf,
                    error=ChildWorkflowError(
                        child_id, "failed", error_record(UnknownWorkflowType(command.name))
                    ),
                )
            try:
                child_input = normalize(f"input of child {child_id!r}", command.input)
            except PayloadError as exc:
                return self._settle(
                    leaf, error=ChildWorkflowError(child_id, "failed", error_record(exc))
                )
            new = WorkflowRun(
                workflow_id=child_id,
                name=command.name,
                status="running",
                input=child_input,
                parent_id=self.run.pk,
                parent_position=leaf.id,
                started_at=timezone.now(),
                turn_started_at=now,
                turn_pid=os.getpid(),
            )
            absence = UniqueAbsence(f"live-run:{child_id}")
            fold = prepare_claim_fold(self.engine, child_id)
            result = self.commit(
                [Insert(new, absence)], folds=[fold] if fold else [], tolerate=True
            )
            if not result.committed:
                return self._settle(
                    leaf,
                    error=ChildWorkflowError(
                        child_id,
                        "conflict",
                        {"message": f"could not start: {result.failed_condition}"},
                    ),
                )
            weft_signals.workflow_started.send(sender=WorkflowRun, run=new)
            self.engine.dispatch(new.pk, None)
            return True
        if child.status in ("completed",):
            return self._settle(leaf, result=child.result)
        if child.status in ("failed", "cancelled", "timed_out"):
            return self._settle(
                leaf, error=ChildWorkflowError(child.workflow_id, child.status, child.error)
            )
        return False

    # -- parking and stopping --------------------------------------------------------
    def _park(self, open_leaves: list[Leaf], inbox: RunInbox) -> bool:
        now = self.engine.now_ms()
        epoch = self.engine.epoch_for(self.run.workflow_id)
        wanted: dict[tuple[str, int], int] = {}
        for leaf in open_leaves:
            command = leaf.command
            if command.kind == "sleep":
                wanted[("sleep", leaf.id)] = now + command.duration_ms  # type: ignore[union-attr]
            timeout = getattr(command, "timeout_ms", None)
            if timeout is not None:
                wanted[("timeout", leaf.id)] = now + timeout
            if ("retry", leaf.id) in inbox.timers:
                wanted[("retry", leaf.id)] = inbox.timers[("retry", leaf.id)].fire_at
        writes: list[Write] = []
        fire_times: list[int] = []
        for key, fire_at in wanted.items():
            existing = inbox.timers.get(key)
            if existing is not None:
                fire_times.append(existing.fire_at)
                continue
            fire_times.append(fire_at)
            writes.append(
                Insert(
                    Timer(
                        run_id=self.run.pk,
                        kind=key[0],
                        position=key[1],
                        fire_at=fire_at,
                        engine_id=self.engine.engine_id,
                        epoch=epoch,
                    )
                )
            )
        stale = [
            t.pk for key, t in inbox.timers.items() if key[1] is not None and key not in wanted
        ]
        if stale:
            writes.append(Delete(Timer, {"pk__in": stale}))
        if self.run.deadline_at is not None:
            fire_times.append(self.run.deadline_at)
        result = self.commit(
            writes,
            conditions=[RunCondition(self.run.pk, wake_seq=self.wake_seq, label="wake-seq")],
            run_values={
                "status": "parked",
                "parked_seq": self.wake_seq,
                "wake_at": min(fire_times) if fire_times else None,
            },
            tolerate=True,
        )
        if result.committed:
            assert self.replay is not None
            self.engine.parked_commands[str(self.run.pk)] = self.replay.commands_yielded
            self._cancel_abandoned_children(inbox)
        return result.committed

    def _cancel_abandoned_children(self, inbox: RunInbox) -> None:
        assert self.replay is not None
        from weft_django.engine import external

        for leaf in self.replay.abandoned_leaves():
            child = inbox.children.get(leaf.id)
            if child is not None and child.status in ("pending", "running", "parked", "suspended"):
                try:
                    external.cancel(child.workflow_id, "lost a race", actor=self.engine.engine_id)
                except Exception:
                    logger.warning(
                        "could not cancel abandoned child %s", child.workflow_id, exc_info=True
                    )

    def _stop(self, status: str, *, result: Any = None, error: Any = None, release: bool) -> None:
        engine = self.engine
        if self.replay is None:
            self.replay = _EmptyReplay()  # type: ignore[assignment]
        wid = self.run.workflow_id
        engine.parked_commands.pop(str(self.run.pk), None)
        try:
            stored = normalize(f"result of {wid!r}", result) if status == "completed" else None
        except PayloadError as exc:
            status, stored, error = "failed", None, error_record(exc)
        no_timers = self._inbox is not None and self._inbox.has_timer_at() is False
        writes: list[Write] = [] if no_timers else [Delete(Timer, {"run_id": self.run.pk})]
        if status != "suspended":
            writes.extend(bump_parent(self.run))
        values: dict[str, Any] = {
            "status": status,
            "result": stored,
            "error": error,
            "wake_at": None,
        }
        if status == "suspended":
            values["suspended_reason"] = str((error or {}).get("message", ""))[:2000]
        else:
            values["finished_at"] = timezone.now()
        transition = (
            engine.registry.prepare_release(wid, reason=status)
            if (release and engine.registry)
            else None
        )
        folded_event, folded_writes, folded_conditions = (
            ([self._folded[0]], self._folded[1], self._folded[2]) if self._folded else ([], [], [])
        )
        self._folded = None
        committed = False
        try:
            self.commit(
                [*folded_writes, *writes, *(transition.writes if transition else ())],
                conditions=[*folded_conditions, *(transition.conditions if transition else ())],
                run_values=values,
                applied=folded_event,
            )
            committed = True
        finally:
            if transition is not None and engine.registry is not None:
                engine.registry.finish_release(wid, committed)
        inbox = load_inbox(self.run, self.db)
        if self.replay is not None and hasattr(self.replay, "abandoned_leaves"):
            self._cancel_abandoned_children(inbox)
        notify_on_commit(DONE_CHANNEL, str(self.run.pk), self.db)
        if self.run.parent_id is not None:
            notify_on_commit(WAKE_CHANNEL, wid, self.db)
            if status != "suspended":  # a suspended child does not wake its parent
                wake_hooks.wake_on_commit(
                    "child-completion", run_id=self.run.parent_id, using=self.db
                )
        self.run.status = status
        signal = {
            "completed": weft_signals.workflow_completed,
            "failed": weft_signals.workflow_failed,
        }.get(status)
        if signal is not None:
            signal.send(sender=WorkflowRun, run=self.run, result=stored, error=error)
        logger.info("workflow %s %s", wid, status)

    def _continue_as_new(self, new_input: Any) -> None:
        wid = self.run.workflow_id
        try:
            fresh_input = normalize(f"continue_as_new input of {wid!r}", new_input)
        except PayloadError as exc:
            self._stop("failed", error=error_record(exc), release=True)
            raise TurnAborted(wid) from exc
        new = WorkflowRun(
            workflow_id=wid,
            name=self.run.name,
            status="running",
            input=fresh_input,
            continued_from_id=self.run.pk,
            parent_id=self.run.parent_id,
            parent_position=self.run.parent_position,
            deadline_at=self.run.deadline_at,
            started_at=timezone.now(),
            turn_started_at=self.engine.now_ms(),
            turn_pid=os.getpid(),
        )
        ended = {
            "status": "completed",
            "result": {"continued_as_new": str(new.pk)},
            "finished_at": timezone.now(),
            "wake_at": None,
        }
        # This turn goes on driving the new run inline: in flight before it
        # exists, or the maintenance pass would start a second turn of it.
        self.engine.adopt_inflight(new.pk)
        # The old run must leave the live statuses before the new one is
        # inserted: one live run per workflow id is a (non-deferred) unique
        # constraint, checked statement by statement.
        self.commit(
            [
                Delete(Timer, {"run_id": self.run.pk}),
                Update(WorkflowRun, {"pk": self.run.pk}, ended),
                Insert(new),
            ],
            run_values=ended,
        )
        self.engine.parked_commands.pop(str(self.run.pk), None)
        self.run = new
        self.version = new.version
        self.wake_seq = new.wake_seq
        self.replay = None
        self._inbox = None


def _writes_timers(write: Write) -> bool:
    """Whether a write of a turn's batch may change the run's timers."""
    if isinstance(write, Insert):
        return isinstance(write.instance, Timer)
    if isinstance(write, Delete | Update):
        return write.model is Timer
    return True  # any other kind of write: assume it may


class _EmptyReplay:
    """Stands in when a run stops before its definition could be loaded."""

    next_position = 0

    def take_new_events(self) -> list[Event]:
        return []

    def apply(self, event: Event) -> None:
        return None

    def abandoned_leaves(self) -> list[Leaf]:
        return []


def _consume(message: SignalMessage, position: int) -> Write:
    return Update(SignalMessage, {"pk": message.pk}, {"consumed_at_position": position})
