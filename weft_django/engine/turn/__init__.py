"""One turn: replay a run, act on its open commands, then park or finish.

Every durable write of a turn is ONE fenced conditional batch (SPEC §4.2,
``commit.TurnState.commit``): the recorded values and the settling event,
the run's state, its timers -- and, at the end, the terminal state with the
claim release folded in. No user code runs inside a transaction or while a
row lock is held: an activity runs first, then its result is committed --
except an atomic activity (``engine.activities.atomic``), whose body runs inside the
transaction that commits its result through that same checkpoint. If
the fence fails the engine was deposed: ``EngineDeposedError`` ends the turn
and the result in hand is dropped. If the park batch finds that a signal
arrived since the turn read the run (``wake_seq`` moved), the turn goes round
again, so a wake can never fall between "nothing to do" and "parked".

The package holds every step of a turn, all writing through that one checkpoint:
``commit`` (the turn's state and its checkpoint), ``steps`` (the command class -> step
table) and a module per kind of step (``activity``, ``async_activity``, ``routed``,
``child``, ``detached``, ``signal_workflow``, ``waits``, ``update``), the attempts in flight
(``concurrent``, ``activity_slots``), ``park`` (timers of a parked run), ``finish`` (the
terminal commit, ``continue_as_new``, post-commit effects), ``cancel``, ``failures``,
``publish`` and ``update_answers``. An attempt the turn started and has not committed
(``engine.activities.pending``) and the log line of a failed attempt or run
(``engine.activities.attempt_log``) are the activities'. A turn sees its engine only as a
``TurnHost`` and imports no transport.
"""

from __future__ import annotations

import logging

from weft_django.codecs.stored import readable
from weft_django.engine import tracing
from weft_django.engine.journal import RunInbox, load_events, load_inbox
from weft_django.engine.replay.errors_codec import error_record
from weft_django.engine.replay.events import ContinuedAsNew, Diverged, Failed, Finished
from weft_django.engine.replay.machine import Leaf, Replay
from weft_django.engine.turn.async_activity import void_async_tokens
from weft_django.engine.turn.cancel import cancel_error, deliver_cancel
from weft_django.engine.turn.child import cancel_abandoned_children
from weft_django.engine.turn.commit import TurnAborted, TurnState
from weft_django.engine.turn.concurrent import await_attempts, commit_finished
from weft_django.engine.turn.failures import mark_turn_started, note_recovery
from weft_django.engine.turn.finish import continue_as_new, stop
from weft_django.engine.turn.park import park
from weft_django.engine.turn.publish import flush as flush_published
from weft_django.engine.turn.steps import act
from weft_django.engine.turn.update import deliver_update
from weft_django.engine.turn.waits import deliver_to_handler
from weft_django.engine.workflow.definitions import get_workflow
from weft_django.errors import UnknownWorkflowType

logger = logging.getLogger("weft_django.engine")

MAX_STEPS = 100_000


class Turn(TurnState):
    """Drive one run from its current park point to the next (or to its end)."""

    def drive(self) -> str:
        """Returns the status the turn asked for (``completed`` even when the
        result was not a valid payload and the run was failed instead)."""
        attention = self.host.turn_attention
        key = str(self.run.pk)
        attention[key] = self.attention
        run, host = self.run, self.host
        try:
            with tracing.turn_span(
                name=run.name,
                workflow_id=run.workflow_id,
                run_id=key,
                carrier=run.trace_context,
                engine_id=host.engine_id,
                epoch=host.epoch_for(run.workflow_id) if tracing.enabled() else 0,
            ) as span:
                self.trace_span = span
                status = self._drive()
                tracing.annotate(span, turn_outcome=status)
                return status
        finally:
            attention.pop(key, None)
            # Whatever ended the turn, nothing it started may still be recorded.
            self.drop_attempts("the turn ended")

    def _drive(self) -> str:
        if note_recovery(self):  # its turns keep dying with their engine
            return "suspended"
        for _ in range(MAX_STEPS):
            if self.replay is None:
                try:
                    self.replay = self._cached_replay() or self._fresh_replay()
                except UnknownWorkflowType as exc:
                    stop(self, "suspended", error=error_record(exc), release=True)
                    return "suspended"
                if self.trace_span is not None:  # the journal's length at the turn's start
                    tracing.annotate(self.trace_span, turn_position=self.replay.next_position)
                    self.trace_span = None
                # Durable before the body runs: a wake that kills its engine is
                # counted by the next owner (after the cache took the replay).
                mark_turn_started(self)
            outcome = self.replay.advance()
            self._note_abandoned()
            if self.replay.cancelled is not None and isinstance(outcome, Finished | Failed):
                # Cleanup is over: a cancelled run ends cancelled even when the
                # body swallowed the cancel; failed if cleanup raised.
                if isinstance(outcome, Failed) and outcome.error.get("type") != "WorkflowCancelled":
                    stop(self, "failed", error=outcome.error, release=True)
                    return "failed"
                stop(self, "cancelled", error=cancel_error(self), release=True)
                return "cancelled"
            if isinstance(outcome, Finished):
                stop(self, "completed", result=outcome.result, release=True)
                return "completed"
            if isinstance(outcome, Failed):
                stop(self, "failed", error=outcome.error, release=True)
                return "failed"
            if isinstance(outcome, Diverged):
                stop(self, "suspended", error=error_record(outcome.error), release=True)
                return "suspended"
            if isinstance(outcome, ContinuedAsNew):
                self.drop_attempts("the run continued as new")
                continue_as_new(self, outcome.input)
                continue
            inbox = self.inbox = load_inbox(self.run, self.db, self.known_timers)
            if self.host.stopping:
                # Shutting down: start no new command. Attempts already running
                # are still committed as they land (within the engine's grace);
                # then the turn stops at this checkpoint, the run stays "running"
                # and the next engine recovers it once this one released the claim.
                if self.attempts:
                    if not commit_finished(self):
                        await_attempts(self, outcome.open, inbox, timers=False)
                    continue
                wid = self.run.workflow_id
                logger.info("turn of %s stopped at a checkpoint: engine stopping", wid)
                return "running"
            if flush_published(self):
                continue
            if deliver_cancel(self):
                continue
            if self._progress(outcome.open, inbox):
                continue
            if self.attempts:
                await_attempts(self, outcome.open, inbox)
                continue
            if park(self, outcome.open, inbox):
                self._keep_in_cache()
                return "parked"
            # Something arrived after the wake_seq this turn knows (the park's
            # condition failed): read it again, then look at the inbox again.
            self.wake_seq = self.read_run_state()[1]
        raise RuntimeError(f"turn of {self.run.workflow_id} did not settle")

    def _fresh_replay(self) -> Replay:
        return Replay(
            get_workflow(self.run.name),
            workflow_id=self.run.workflow_id,
            run_id=str(self.run.pk),
            input=readable(self.run.input, self.run.pk, "input"),
            # A fresh run (``engine.handoff``) has no journal: nothing to read.
            events=[] if self.fresh else load_events(self.run.pk, self.db),
            clock_ms=self.host.now_ms,
            replayed_commands=self.host.parked_commands.get(str(self.run.pk), 0),
        )

    def _cached_replay(self) -> Replay | None:
        """This engine's replay of the run as it parked it, if nothing changed since
        (``engine.workflow_cache``): a wake then feeds only the new events."""
        cache = self.host.workflow_cache
        if cache is None:
            return None
        replay = cache.take(
            str(self.run.pk), epoch=self.host.epoch_for(self.run.workflow_id), version=self.version
        )
        if replay is not None and replay.definition != get_workflow(self.run.name):
            replay = None  # other code is registered now: replay it from the journal
        self.host.metrics.record_workflow_cache_lookup(hit=replay is not None)
        return replay

    def _keep_in_cache(self) -> None:
        cache = self.host.workflow_cache
        if cache is not None and self.replay is not None:
            cache.put(
                str(self.run.pk),
                epoch=self.host.epoch_for(self.run.workflow_id),
                version=self.version,
                replay=self.replay,
            )

    def _note_abandoned(self) -> None:
        """Leaves a race or a failed all just abandoned: drop their attempts,
        void their async tokens (with the next commit) and cancel their
        children (once what abandoned them is durable)."""
        assert self.replay is not None
        abandoned = self.replay.take_abandoned()
        if abandoned:
            self.drop_attempts("its branch was cancelled", [leaf.id for leaf in abandoned])
            self.abandoned.extend(abandoned)
            self.deferred.extend(void_async_tokens(self.run.pk, abandoned))
            if self.held_result is None:
                # What abandoned them is committed (a held result is not yet):
                # their children can be cancelled now, not at the next park.
                cancel_abandoned_children(self)

    def _progress(self, open_leaves: list[Leaf], inbox: RunInbox) -> bool:
        """One step of progress: a signal to a handler, a finished attempt
        committed, or an open command carried out; every open activity that
        can start is started on the way (they run at once)."""
        if deliver_to_handler(self, open_leaves, inbox):
            return True
        if deliver_update(self, inbox):
            return True
        if commit_finished(self):
            return True
        now = self.host.now_ms()
        return any(act(self, leaf, inbox, now) for leaf in open_leaves)


def _position(leaf: Leaf) -> int:
    return leaf.id


__all__ = ["MAX_STEPS", "Turn", "TurnAborted"]
