"""``ClaimRegistry`` (SPEC §4.9): this engine's view of the claims it holds.

Invariants:
- A lost race is a *result*, never an exception; only a database error raises.
- The registry remembers the exact holder columns it last wrote for each
  claim and conditions its renewals and its own releases on them, so a
  claim changed by anyone else is noticed, never silently renewed back.
- Renewing every held claim is ONE statement (``UPDATE … RETURNING``) for
  any number of claims. Scope ``"held"`` (a standalone engine) matches each
  row on its exact holder; scope ``"engine"`` (a Celery node, whose claims
  are taken by several pool processes) renews every row carrying this
  engine id, and a claim renewed last pass but not returned now was lost —
  unless a sibling process of the same engine released it at that epoch
  (its run completed): one more read, only when something is missing.
- Tracking starts only after the acquiring batch committed. A batch nested
  in its caller's transaction (a batch pickup) is tracked before that
  transaction commits; a renewal that cannot see the acquire yet keeps the
  claim (``pending``), never reports it lost.
- Every transition (acquire, takeover, renew, release, adoption after a bulk
  takeover) reads and writes the same tracked holders under one lock; the
  statements themselves live in ``ownership.transitions`` and the vendor seam.

Over 400 lines: one class whose transitions share one lock and one holder table, read as one.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Literal

from weft_django import db as store
from weft_django.models import WorkflowClaim
from weft_django.ownership import TAKEOVER_MAX_ATTEMPTS
from weft_django.ownership.batch import conditional_batch
from weft_django.ownership.codec import (
    MAX_EPOCH_EXCLUSIVE,
    MAX_TIMESTAMP_EXCLUSIVE,
    HolderRecord,
    holder_row_absent,
)
from weft_django.ownership.loss import ClaimLoss, ReportedLosses, classify_losses, report_loss
from weft_django.ownership.metrics import ClaimMetrics
from weft_django.ownership.renewal_gate import RenewalGate
from weft_django.ownership.results import (
    AcquirePreparation,
    AcquireResult,
    ReleaseResult,
    RenewOutcome,
    TakeoverResult,
)
from weft_django.ownership.slots import carry_on_takeover
from weft_django.ownership.transitions import (
    ClaimSnapshot,
    Transition,
    build_acquire,
    build_release,
    build_takeover,
    is_claim_expired,
)

RenewScope = Literal["held", "engine"]


class TakeoverCooldown:
    """Takeover cooldown (SPEC §4.4): an in-memory anti-thrash window per workflow.

    After this engine is deposed from a workflow it must not immediately take
    that workflow back (two engines trading a claim every pass). The window is
    fixed -- one renew interval from the deposition -- not exponential; a second
    deposition restarts it; at ``now == until`` it is no longer active; a
    successful acquire or takeover clears it.
    """

    def __init__(self, window_ms: int) -> None:
        if isinstance(window_ms, bool) or not isinstance(window_ms, int) or window_ms < 0:
            raise ValueError(
                f"cooldown window must be a non-negative integer of ms, got {window_ms!r}"
            )
        self.window_ms = window_ms
        self._until: dict[str, int] = {}
        self._lock = threading.Lock()

    def is_active(self, workflow_id: str, now: int) -> bool:
        with self._lock:
            until = self._until.get(workflow_id)
            if until is None:
                return False
            if now < until:
                return True
            del self._until[workflow_id]
            return False

    def record_deposition(self, workflow_id: str, now: int) -> None:
        with self._lock:
            self._until[workflow_id] = now + self.window_ms

    def clear(self, workflow_id: str) -> None:
        with self._lock:
            self._until.pop(workflow_id, None)

    def active_ids(self, now: int) -> list[str]:
        with self._lock:
            return [wid for wid, until in self._until.items() if now < until]


class ClaimRegistry:
    """Acquire, take over, renew and release claims for one engine."""

    def __init__(
        self,
        *,
        engine_id: str,
        clock: Callable[[], int],
        claim_ttl_ms: int,
        claim_renew_interval_ms: int,
        using: str = "default",
        metrics: ClaimMetrics | None = None,
        renew_scope: RenewScope = "held",
    ) -> None:
        self.engine_id = engine_id
        self.clock = clock
        self.claim_ttl_ms = claim_ttl_ms
        self.claim_renew_interval_ms = claim_renew_interval_ms
        self.using = using
        self.metrics = metrics if metrics is not None else ClaimMetrics()
        self.renew_scope = renew_scope
        self.cooldown = TakeoverCooldown(claim_renew_interval_ms)
        self._claims: dict[str, HolderRecord] = {}
        #: workflow id -> the engine whose claim this engine took over, kept until
        #: the first turn under the new claim takes it (``pop_taken_from``): a run
        #: that engine left ``running`` had a turn die with it.
        self._taken_from: dict[str, str] = {}
        self._releasing: set[str] = set()
        self._lock = threading.RLock()
        #: Renewal passes hold it; a release waits on it (see ``renewal_gate``).
        self.renewal = RenewalGate()
        #: Generations already reported lost (``ownership.loss``): counted once.
        self.losses = ReportedLosses()

    # -- reads ---------------------------------------------------------------
    def read(self, workflow_id: str) -> ClaimSnapshot:
        """A fresh, unlocked read of the claim row (missing row = never claimed)."""
        row = store.ops(self.using).read_claim(self.using, workflow_id)
        if row is None:
            return ClaimSnapshot(workflow_id)
        return ClaimSnapshot(workflow_id, *row)

    def current_epoch(self, workflow_id: str) -> int | None:
        with self._lock:
            holder = self._claims.get(workflow_id)
            return holder.epoch if holder is not None else None

    def holder(self, workflow_id: str) -> HolderRecord | None:
        with self._lock:
            return self._claims.get(workflow_id)

    def tracked(self) -> list[str]:
        with self._lock:
            return list(self._claims)

    def is_releasing(self, workflow_id: str) -> bool:
        """A release (or a prepared release) of ``workflow_id`` is under way."""
        with self._lock:
            return workflow_id in self._releasing

    def _held_by(self, workflow_id: str) -> str | None:
        holder = self.read(workflow_id).holder
        return holder.engine_id if holder is not None else None

    def _track(self, workflow_id: str, holder: HolderRecord) -> None:
        with self._lock:
            self._claims[workflow_id] = holder
            self.metrics.set_active_claims(len(self._claims))
        self.cooldown.clear(workflow_id)
        self.losses.discard(workflow_id)

    def _untrack(self, workflow_id: str, expected: HolderRecord | None = None) -> None:
        with self._lock:
            current = self._claims.get(workflow_id)
            if current is not None and (expected is None or current is expected):
                del self._claims[workflow_id]
                self._taken_from.pop(workflow_id, None)
            self.metrics.set_active_claims(len(self._claims))

    # -- acquire -------------------------------------------------------------
    def prepare_acquire(
        self, workflow_id: str, snapshot: ClaimSnapshot | None = None
    ) -> AcquirePreparation:
        """An acquire of ``workflow_id`` from ``snapshot`` (a read the caller
        just made, e.g. under its own lock), else from a fresh read."""
        if snapshot is None:
            snapshot = self.read(workflow_id)
        transition = build_acquire(
            snapshot, engine_id=self.engine_id, now=self.clock(), ttl_ms=self.claim_ttl_ms
        )
        return AcquirePreparation(workflow_id, transition)

    def record_folded_acquire(self, preparation: AcquirePreparation) -> None:
        """Track a claim whose acquire the caller committed in its own batch."""
        assert preparation.transition.holder is not None
        self._track(preparation.workflow_id, preparation.transition.holder)
        self.metrics.record_claim_attempt("acquired")

    def acquire(self, workflow_id: str) -> AcquireResult:
        """Standalone acquire: CAS {holder absent, epoch = e read} → e+1."""
        snapshot = self.read(workflow_id)
        if not snapshot.holder_absent:
            holder = snapshot.holder
            self.metrics.record_claim_attempt("lost_race")
            return AcquireResult(
                "lost-race", workflow_id, held_by=holder.engine_id if holder else None
            )
        transition = build_acquire(
            snapshot, engine_id=self.engine_id, now=self.clock(), ttl_ms=self.claim_ttl_ms
        )
        result = conditional_batch(transition.conditions, transition.writes, using=self.using)
        if result.committed:
            assert transition.holder is not None
            self._track(workflow_id, transition.holder)
            self.metrics.record_claim_attempt("acquired")
            return AcquireResult("acquired", workflow_id, epoch=transition.epoch)
        self.metrics.record_claim_attempt("lost_race")
        return AcquireResult("lost-race", workflow_id, held_by=self._held_by(workflow_id))

    # -- takeover ------------------------------------------------------------
    def takeover(
        self, workflow_id: str, gone_holders: frozenset[str] = frozenset()
    ) -> TakeoverResult:
        """Take over an expired (or undecodable) holder at stored epoch + 1.

        ``gone_holders``: engines known dead (``ownership.presence``); a holder
        among them is takeable before it expires. Still the same CAS on the
        exact holder read here: a holder that changed meanwhile wins.
        """
        now = self.clock()
        if self.cooldown.is_active(workflow_id, now):
            self.metrics.record_claim_attempt("backoff_skipped")
            return TakeoverResult("backoff-skipped", workflow_id)
        snapshot = self.read(workflow_id)
        if snapshot.holder_absent:
            return TakeoverResult("no-claim", workflow_id)
        holder = snapshot.holder
        if (
            holder is not None
            and holder.engine_id not in gone_holders
            and not is_claim_expired(
                expires_at=holder.expires_at,
                now=now,
                renew_interval_ms=self.claim_renew_interval_ms,
            )
        ):
            return TakeoverResult(
                "not-expired", workflow_id, held_by=holder.engine_id, expires_at=holder.expires_at
            )
        transition = build_takeover(
            snapshot, engine_id=self.engine_id, now=now, ttl_ms=self.claim_ttl_ms
        )
        # A queue slot of the generation ending goes on with the new one (``ownership.slots``).
        carry = carry_on_takeover([(workflow_id, snapshot.epoch, transition.epoch)], now)
        result = conditional_batch(
            transition.conditions, [*transition.writes, *carry], using=self.using
        )
        if result.committed:
            assert transition.holder is not None
            self._track(workflow_id, transition.holder)
            self._note_taken_from(workflow_id, snapshot.engine_id)
            self.metrics.record_claim_attempt("takeover")
            return TakeoverResult("acquired", workflow_id, epoch=transition.epoch)
        self.metrics.record_claim_attempt("lost_race")
        return TakeoverResult("lost-race", workflow_id, held_by=self._held_by(workflow_id))

    def adopt_taken_over(
        self, workflow_id: str, transition: Transition, previous: str | None = None
    ) -> None:
        """Track a claim whose ``build_takeover`` the caller committed in its
        own batch (a bulk takeover); only after that batch is durable.
        ``previous``: the engine it was taken from."""
        assert transition.holder is not None
        self._track(workflow_id, transition.holder)
        self._note_taken_from(workflow_id, previous)
        self.metrics.record_claim_attempt("takeover")

    def _note_taken_from(self, workflow_id: str, previous: str | None) -> None:
        with self._lock:
            self._taken_from[workflow_id] = previous or ""

    def note_turn_died(self, workflow_id: str, lost: str) -> None:
        """A turn of ``workflow_id`` under this engine's own claim died with its
        process (a Celery pool process): the next turn counts it as a turn
        that died with its engine, like one a takeover finds (``lost``: who)."""
        self._note_taken_from(workflow_id, lost)

    def pop_taken_from(self, workflow_id: str) -> str | None:
        """The engine this engine took ``workflow_id``'s claim over from, once
        (``None``: acquired, not taken over, or already asked)."""
        with self._lock:
            return self._taken_from.pop(workflow_id, None)

    # -- renew ---------------------------------------------------------------
    def renew_all(self) -> list[RenewOutcome]:
        """Renew every held claim in one statement; a database error propagates."""
        with self.renewal.renewal_pass():
            if self.renew_scope == "engine":
                return self._renew_engine_scope()
            with self._lock:
                held = {wid: h for wid, h in self._claims.items() if wid not in self._releasing}
                outcomes: list[RenewOutcome] = [
                    RenewOutcome(wid, "not-held") for wid in self._claims if wid in self._releasing
                ]
            if not held:
                return outcomes
            now = self.clock()
            new_expires = now + self.claim_ttl_ms
            rows = [(w, h.epoch, h.engine_id, h.expires_at, h.claimed_at) for w, h in held.items()]
            renewed = store.ops(self.using).renew_exact_holders(self.using, rows, new_expires)
            lost: list[str] = []
            with self._lock:
                for wid, old in held.items():
                    current = self._claims.get(wid)
                    if current is not old:
                        outcomes.append(RenewOutcome(wid, "not-held"))
                    elif wid in renewed:
                        # Refresh the cache even if a release began meanwhile: the
                        # release waits for this pass and then CASes on these columns.
                        self._claims[wid] = HolderRecord(
                            old.engine_id, old.epoch, new_expires, old.claimed_at
                        )
                        outcomes.append(RenewOutcome(wid, "renewed"))
                    elif wid in self._releasing:
                        outcomes.append(RenewOutcome(wid, "not-held"))
                    else:
                        lost.append(wid)
            pending = self._not_yet_visible({w: held[w] for w in lost}, now) if lost else set()
            with self._lock:
                for wid in lost:
                    if wid in pending:
                        outcomes.append(RenewOutcome(wid, "pending"))
                    elif self._claims.get(wid) is held[wid]:
                        del self._claims[wid]
                        outcomes.append(RenewOutcome(wid, "lost"))
                    else:  # released or re-tracked meanwhile: not this pass's loss
                        outcomes.append(RenewOutcome(wid, "not-held"))
                lost = [w for w in lost if w not in pending]
                self.metrics.set_active_claims(len(self._claims))
            if lost:
                self._record_losses(now, {wid: held[wid].epoch for wid in lost})
            return outcomes

    def _renew_engine_scope(self) -> list[RenewOutcome]:
        now = self.clock()
        new_expires = now + self.claim_ttl_ms
        # Only rows whose holder decodes: a corrupt row is never adopted or revived.
        rows = store.ops(self.using).renew_engine_rows(
            self.using,
            self.engine_id,
            new_expires,
            epoch_limit=MAX_EPOCH_EXCLUSIVE,
            timestamp_limit=MAX_TIMESTAMP_EXCLUSIVE,
        )
        outcomes: list[RenewOutcome] = []
        lost: list[tuple[str, int]] = []
        with self._lock:
            previous = dict(self._claims)
            fresh = {
                wid: HolderRecord(self.engine_id, epoch, new_expires, claimed_at)
                for wid, epoch, claimed_at in rows
                if wid not in self._releasing
            }
            for wid, old in previous.items():
                if wid in self._releasing:
                    outcomes.append(RenewOutcome(wid, "not-held"))
                elif wid not in fresh:
                    # (A row in ``fresh`` carries this engine id, at this epoch or at
                    # a newer one a sibling process re-acquired: still held.)
                    lost.append((wid, old.epoch))
            outcomes.extend(RenewOutcome(wid, "renewed") for wid in fresh)
            self._claims = {**{w: h for w, h in previous.items() if w in self._releasing}, **fresh}
            self.metrics.set_active_claims(len(self._claims))
        ended_here = self._ended_by_this_engine(lost) if lost else set()
        missing = {w: previous[w] for w, _ in lost if w not in ended_here}
        pending = self._not_yet_visible(missing, now) if missing else set()
        if pending:
            with self._lock:
                for wid in pending:
                    self._claims.setdefault(wid, previous[wid])
                self.metrics.set_active_claims(len(self._claims))
        really_lost: dict[str, int] = {}
        for wid, epoch in lost:
            if wid in ended_here:
                outcomes.append(RenewOutcome(wid, "not-held"))
                continue
            if wid in pending:
                outcomes.append(RenewOutcome(wid, "pending"))
                continue
            outcomes.append(RenewOutcome(wid, "lost"))
            really_lost[wid] = epoch
        if really_lost:
            self._record_losses(now, really_lost)
        return outcomes

    def _not_yet_visible(self, candidates: dict[str, HolderRecord], now: int) -> set[str]:
        """The ids among ``candidates`` (tracked, not renewed) whose acquire
        this pass could not see yet: not lost.

        A batch pickup or a queue admission folds its acquires into the
        caller's transaction, and the registry tracks them once the batch
        statement ran -- before that transaction commits, since the turns that
        follow need them. A renewal on its own connection in that window reads
        the row at the epoch before (or no row, for a new workflow id): the
        claim stays tracked (outcome ``pending``) and the next pass renews it;
        so does a row the transaction committed right after the pass's
        statement (it now shows this engine at the tracked epoch).
        Only while the tracked claim is unexpired: an acquire committed after
        its own expiry may be taken over at once, so it is not kept.
        """
        unexpired = {w: h for w, h in candidates.items() if now < h.expires_at}
        if not unexpired:
            return set()
        rows: dict[str, tuple[int, str | None, int | None, int | None]] = {
            w: (int(epoch), engine_id, expires_at, claimed_at)
            for w, epoch, engine_id, expires_at, claimed_at in WorkflowClaim.objects.using(
                self.using
            )
            .filter(pk__in=list(unexpired))
            .values_list("workflow_id", "epoch", "engine_id", "expires_at", "claimed_at")
        }
        # Committed between the pass's statement and this read: the row now
        # carries exactly the tracked holder -- no loss either. (Any other
        # change at this epoch is someone else's: lost, never renewed back.)
        return {
            w
            for w, h in unexpired.items()
            if rows.get(w, (0, None, None, None))[0] < h.epoch
            or rows.get(w) == (h.epoch, h.engine_id, h.expires_at, h.claimed_at)
        }

    def _ended_by_this_engine(self, missing: list[tuple[str, int]]) -> set[str]:
        """Engine scope: the ids among ``missing`` whose generation this engine
        ended itself — released by a sibling pool process at the same epoch (a
        completed run), or since re-acquired by one (a race with this pass).
        Not a loss."""
        epochs = dict(missing)
        rows = (
            WorkflowClaim.objects.using(self.using)
            .filter(pk__in=list(epochs))
            .values_list("workflow_id", "epoch", "engine_id", "expires_at", "claimed_at")
        )
        ended: set[str] = set()
        for wid, epoch, engine_id, expires_at, claimed_at in rows:
            released = holder_row_absent(engine_id, expires_at, claimed_at) and epoch == epochs[wid]
            if released or engine_id == self.engine_id:
                ended.add(wid)
        return ended

    def adopt(self, workflow_id: str, epoch: int) -> HolderRecord | None:
        """Engine scope: track a claim another process of this engine took.

        Re-reads the holder; tracks it (and returns it) only when the row
        carries this engine id at exactly ``epoch``, else ``None`` and nothing
        changes. A Celery pool process adopts the claim a wake message names
        before each turn, since claims are renewed by the node, not by it.
        """
        holder = self.read(workflow_id).holder
        if holder is None or holder.engine_id != self.engine_id or holder.epoch != epoch:
            return None
        with self._lock:
            self._claims[workflow_id] = holder
            self.metrics.set_active_claims(len(self._claims))
        return holder

    def _record_losses(self, now: int, lost: dict[str, int]) -> None:
        """Count and log claims found lost at renewal, once each: an operator's
        rotation as ``rotated``, a real loss as a renewal failure and
        ``deposed`` (one read for all, only when something was lost)."""
        try:
            found = classify_losses(self.using, lost)
        except Exception:  # the read failed: report the conservative answer
            found = {wid: ClaimLoss(wid, epoch, "deposed") for wid, epoch in lost.items()}
        for wid in lost:
            loss = found[wid]
            # Whoever ended the generation, this engine backs off one renew
            # interval before it claims the run again: how a loss is reported
            # (rotated or deposed) never changes when it is retaken.
            self.cooldown.record_deposition(wid, now)
            if self.losses.add(loss):
                report_loss(
                    loss, self.metrics, engine_id=self.engine_id, during="renewal", renewal=True
                )

    def record_loss(self, loss: ClaimLoss, *, during: str) -> None:
        """Count and log a loss found outside renewal (a fenced write), once."""
        if self.losses.add(loss):
            report_loss(loss, self.metrics, engine_id=self.engine_id, during=during)

    # -- release -------------------------------------------------------------
    def release(self, workflow_id: str, expected_epoch: int | None = None) -> ReleaseResult:
        """CAS {epoch = mine, holder = mine} → delete the holder, keep the epoch."""
        with self._lock:
            self._releasing.add(workflow_id)
        try:
            self.renewal.wait_idle()
            with self._lock:
                holder = self._claims.get(workflow_id)
            if holder is None or (expected_epoch is not None and holder.epoch != expected_epoch):
                return ReleaseResult("not-held", workflow_id)
            # Engine scope: sibling pool processes renew this engine's rows too, so
            # expires_at may have moved; compare the owner at the epoch instead.
            exact = self.renew_scope != "engine"
            transition = build_release(workflow_id, holder, now=self.clock(), exact=exact)
            # A statement that raised leaves the outcome in doubt (the server
            # may have gone away after committing): the claim stays tracked, so
            # renewal keeps it and the caller's retry releases it -- forgetting
            # it here would leave a row naming this engine that nothing renews,
            # releases or takes over while its workflow has nothing to drive.
            result = conditional_batch(transition.conditions, transition.writes, using=self.using)
            self._untrack(workflow_id, holder)
            return ReleaseResult("released" if result.committed else "lost-race", workflow_id)
        finally:
            with self._lock:
                self._releasing.discard(workflow_id)

    def prepare_release(self, workflow_id: str, reason: str = "") -> Transition | None:
        """Release conditions and writes to fold into a terminal commit.

        Marks the id as releasing so a concurrent renewal reports ``not-held``
        instead of a false loss; call ``finish_release`` afterwards.
        """
        with self._lock:
            holder = self._claims.get(workflow_id)
            if holder is None:
                return None
            self._releasing.add(workflow_id)
        return build_release(workflow_id, holder, now=self.clock(), exact=False, reason=reason)

    def finish_release(self, workflow_id: str, committed: bool) -> None:
        with self._lock:
            self._releasing.discard(workflow_id)
            if committed:
                self._claims.pop(workflow_id, None)
            self.metrics.set_active_claims(len(self._claims))

    def forget(self, workflow_id: str) -> None:
        """Drop local tracking only (the holder is already gone durably)."""
        self._untrack(workflow_id)

    def release_all(self) -> list[ReleaseResult]:
        """Best-effort release of every claim (graceful shutdown)."""
        results: list[ReleaseResult] = []
        for wid in self.tracked():
            try:
                results.append(self.release(wid))
            except Exception:  # best effort: the claim expires anyway
                self._untrack(wid)
        return results


def takeover_with_retries(
    registry: ClaimRegistry,
    workflow_id: str,
    max_attempts: int | None = None,
    gone_holders: frozenset[str] = frozenset(),
) -> TakeoverResult:
    """Retry a lost takeover CAS with a fresh read, at most ``TAKEOVER_MAX_ATTEMPTS``."""
    attempts = max_attempts or TAKEOVER_MAX_ATTEMPTS
    result = TakeoverResult("lost-race", workflow_id)
    for _ in range(attempts):
        result = registry.takeover(workflow_id, gone_holders)
        if result.status != "lost-race":
            return result
    return result


__all__ = [
    "AcquirePreparation",
    "AcquireResult",
    "ClaimRegistry",
    "ReleaseResult",
    "RenewOutcome",
    "RenewScope",
    "TakeoverCooldown",
    "TakeoverResult",
    "takeover_with_retries",
]
