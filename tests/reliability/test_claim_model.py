"""Model-based test of the claim protocol against the real database code (SPEC §4).

Three engines (each a ``StaticHost`` with its own ``ManualClock``, skewed
from a shared "true time" by less than one renew interval) and one to three
workflow ids; hypothesis interleaves, one whole operation at a time:
advancing true time, standalone acquire, renewal, release, takeover (with
retries), an external rotation (a cancel from a web process, either read
and committed at once or read now and committed steps later), a claim fold
read now and committed later, fenced writes (a ``WorkflowRun.version``
bump), and wakes through the guard.

A plain-Python model predicts every outcome (each result's status, epoch
and holder, each ``ClaimEvent``, each row, what each registry tracks), and
these invariants are checked after every step, from the database and the
``ClaimEvent`` history -- each event stamped with a global sequence number:

- every successful fenced write happened at an epoch granted to the writer
  (an ``acquire``/``takeover`` event naming it) and not yet superseded (no
  later grant, rotation or release of that epoch before the write);
  ``WorkflowRun.version`` counts exactly the successful writes;
- an engine that believes in an older epoch (or none) never commits:
  ``fenced_commit`` raises ``EngineDeposedError`` for it;
- per workflow, ``acquire``/``takeover``/``rotate`` events mint exactly the
  stored epoch + 1 (strictly increasing) and a ``release`` keeps the epoch
  of the grant it ends; the row's epoch is the last event's;
- a wake proceeds only for the current generation: ``proceed`` means the
  stored holder is that engine at that epoch;
- a released, rotated or taken-over generation is never renewed back: the
  row's holder is always the latest grant, never a dead ``(engine, epoch)``;
- a takeover never happens while the old holder's own clock still says its
  claim is valid (the grace of 2 renew intervals covers a clock skew of
  less than one renew interval per engine).

Operations interleave *between* batches here; races inside a batch are the
process race tests' business. Default run: 100 examples of up to 30 steps; the
soak (``--soak`` or ``WEFT_SOAK=1``) runs 2000 examples of 40 steps.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass

import pytest
from django.db.models import F
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from tests.support import ManualClock, StaticHost
from weft_django.conf import get_settings
from weft_django.errors import EngineDeposedError
from weft_django.models import ClaimEvent, WorkflowClaim, WorkflowRun
from weft_django.ownership import WORKFLOW_CLAIM_TAKEOVER_GRACE_MULTIPLIER
from weft_django.ownership.batch import conditional_batch
from weft_django.ownership.codec import HolderRecord, decode_holder_row
from weft_django.ownership.fence import fenced_commit
from weft_django.ownership.fold import ClaimFold, commit_with_claim_fold, prepare_claim_fold
from weft_django.ownership.guard import confirm_wake_ownership
from weft_django.ownership.ops import Update
from weft_django.ownership.registry import takeover_with_retries
from weft_django.ownership.transitions import ClaimSnapshot, build_rotation
from weft_django.warnings import WAKE_KINDS

ENGINES = 3
START_MS = 1_000_000_000
GRANTS = ("acquire", "takeover")
MINTS = ("acquire", "takeover", "rotate")

DEFAULT_EXAMPLES, DEFAULT_STEPS = 100, 30
SOAK_EXAMPLES, SOAK_STEPS = 2000, 40

engine_index = st.integers(0, ENGINES - 1)
workflow_index = st.integers(0, 2)  # taken modulo the example's number of workflows
wake_epoch = st.integers(0, 3)  # tracked (None), one older, a past grant, the stored epoch
wake_kind = st.sampled_from(WAKE_KINDS)


@dataclass
class ModelRow:
    """What the model says the ``WorkflowClaim`` row holds."""

    epoch: int = 0
    holder: HolderRecord | None = None


@dataclass(frozen=True)
class Event:
    """A ``ClaimEvent`` as read back, stamped with the global sequence number."""

    seq: int
    kind: str
    epoch: int
    engine_id: str
    at_ms: int
    previous_engine_id: str
    previous_expires_at: int | None


@dataclass(frozen=True)
class FencedWrite:
    engine_id: str
    workflow_id: str
    epoch: int
    seq: int


@dataclass
class PendingFold:
    engine: int
    workflow_id: str
    fold: ClaimFold
    read_epoch: int


class ClaimProtocolMachine(RuleBasedStateMachine):
    """The real registry, batch, fence, fold and guard against a Python model."""

    examples_run = 0
    steps_run = 0
    outcomes: Counter[str] = Counter()

    # -- set-up (one per example) ------------------------------------------------
    @initialize(
        n_workflows=st.integers(1, 3),
        skews=st.lists(st.integers(-1000, 1000), min_size=ENGINES, max_size=ENGINES),
    )
    def setup(self, n_workflows: int, skews: list[int]) -> None:
        ClaimEvent.objects.all().delete()
        WorkflowClaim.objects.all().delete()
        WorkflowRun.objects.all().delete()
        conf = get_settings()
        self.ttl = conf.claim_ttl_ms
        self.renew = conf.claim_renew_interval_ms
        self.grace = WORKFLOW_CLAIM_TAKEOVER_GRACE_MULTIPLIER * self.renew
        self.true_now = START_MS
        # |skew| < one renew interval, as SPEC §4.3's clock check guarantees.
        self.skews = [(self.renew - 1) * p // 1000 for p in skews]
        self.clocks = [ManualClock(self.true_now + s) for s in self.skews]
        self.hosts = [StaticHost(f"engine-{i}", c) for i, c in enumerate(self.clocks)]
        self.ids = [h.engine_id for h in self.hosts]
        self.wfs = [f"wf-{i}" for i in range(n_workflows)]
        self.run_pk = {
            wf: WorkflowRun.objects.create(workflow_id=wf, name="model", status="running").pk
            for wf in self.wfs
        }
        # The model.
        self.rows = {wf: ModelRow() for wf in self.wfs}
        self.tracked: list[dict[str, HolderRecord]] = [{} for _ in range(ENGINES)]
        self.cooldown: list[dict[str, int]] = [{} for _ in range(ENGINES)]
        self.granted_to: list[dict[str, list[int]]] = [{} for _ in range(ENGINES)]
        self.dead: dict[str, set[tuple[str, int]]] = {wf: set() for wf in self.wfs}
        self.pending_rotations: list[ClaimSnapshot] = []
        self.pending_folds: list[PendingFold] = []
        # The record the invariants check against.
        self.seq = 0
        self.last_event_id = 0
        self.events: dict[str, list[Event]] = {wf: [] for wf in self.wfs}
        self.writes: list[FencedWrite] = []
        type(self).examples_run += 1

    # -- helpers -------------------------------------------------------------------
    def _wf(self, w: int) -> str:
        return self.wfs[w % len(self.wfs)]

    def _held(self) -> list[tuple[int, str]]:
        """Every (engine, workflow) an engine tracks, stale or not."""
        return [(e, wf) for e in range(ENGINES) for wf in sorted(self.tracked[e])]

    def _pick_held(self, i: int) -> tuple[int, str]:
        held = self._held()
        return held[i % len(held)]

    def _step(self) -> None:
        type(self).steps_run += 1

    def _count(self, what: str, outcome: str) -> None:
        type(self).outcomes[f"{what}:{outcome}"] += 1

    def _ingest_events(self) -> list[Event]:
        """Read the events the last operation appended; stamp each with a sequence number."""
        fresh = []
        rows = ClaimEvent.objects.filter(id__gt=self.last_event_id).order_by("id")
        for row in rows:
            self.seq += 1
            self.last_event_id = row.id
            event = Event(
                self.seq,
                row.kind,
                row.epoch,
                row.engine_id,
                row.at_ms,
                row.previous_engine_id,
                row.previous_expires_at,
            )
            self.events[row.workflow_id].append(event)
            fresh.append(event)
        return fresh

    @staticmethod
    def _shape(events: list[Event]) -> list[tuple[str, int, str]]:
        return [(e.kind, e.epoch, e.engine_id) for e in events]

    def _kill(self, wf: str) -> None:
        """The current holder's generation ends (release, rotation, takeover)."""
        holder = self.rows[wf].holder
        if holder is not None:
            self.dead[wf].add((holder.engine_id, holder.epoch))

    def _grant(self, e: int, wf: str, holder: HolderRecord) -> None:
        self.rows[wf] = ModelRow(holder.epoch, holder)
        self.tracked[e][wf] = holder
        self.cooldown[e].pop(wf, None)
        self.granted_to[e].setdefault(wf, []).append(holder.epoch)

    # -- rules ---------------------------------------------------------------------
    def _advance(self, ms: int) -> None:
        self._step()
        self.true_now += ms
        for clock, skew in zip(self.clocks, self.skews, strict=True):
            clock.now = self.true_now + skew

    @rule(base=st.sampled_from(["renew", "ttl", "expiry", "late"]), jitter=st.integers(-1000, 1000))
    def advance_true_time(self, base: str, jitter: int) -> None:
        """Move true time to around a boundary: one renew interval, the TTL, the
        takeover point (TTL + grace) or beyond it, ± one renew interval."""
        ms = {
            "renew": self.renew,
            "ttl": self.ttl,
            "expiry": self.ttl + self.grace,
            "late": 2 * self.ttl,
        }[base]
        self._advance(max(0, ms + self.renew * jitter // 1000))

    @rule(permille=st.integers(0, 1000), renewers=st.sets(engine_index))
    def tick(self, permille: int, renewers: set[int]) -> None:
        """Up to one renew interval passes; the engines whose loop is not stalled renew."""
        self._advance(self.renew * permille // 1000)
        for e in sorted(renewers):
            self._renew_all(e)

    @rule(e=engine_index, w=workflow_index)
    def acquire(self, e: int, w: int) -> None:
        self._step()
        wf, host, row = self._wf(w), self.hosts[e], self.rows[self._wf(w)]
        now = self.clocks[e].now
        result = host.registry.acquire(wf)
        self._count("acquire", result.status)
        fresh = self._ingest_events()
        if row.holder is None:
            epoch = row.epoch + 1
            assert (result.status, result.epoch) == ("acquired", epoch), result
            assert self._shape(fresh) == [("acquire", epoch, self.ids[e])]
            self._grant(e, wf, HolderRecord(self.ids[e], epoch, now + self.ttl, now))
        else:
            assert (result.status, result.held_by) == ("lost-race", row.holder.engine_id), result
            assert fresh == []

    @rule(e=engine_index)
    def renew_all(self, e: int) -> None:
        self._step()
        self._renew_all(e)

    def _renew_all(self, e: int) -> None:
        now = self.clocks[e].now
        outcomes = {o.workflow_id: o.status for o in self.hosts[e].registry.renew_all()}
        for status in outcomes.values():
            self._count("renew", status)
        expected: dict[str, str] = {}
        for wf, mine in list(self.tracked[e].items()):
            row = self.rows[wf]
            if row.holder == mine:
                fresh = HolderRecord(mine.engine_id, mine.epoch, now + self.ttl, mine.claimed_at)
                row.holder = self.tracked[e][wf] = fresh
                expected[wf] = "renewed"
            else:
                del self.tracked[e][wf]
                self.cooldown[e][wf] = now + self.renew
                expected[wf] = "lost"
        assert outcomes == expected
        assert self._ingest_events() == []  # renewal writes no history

    @precondition(lambda self: self._held())
    @rule(i=st.integers(0, 8))
    def release(self, i: int) -> None:
        """An engine releases a claim it tracks (its run ended); it may be stale."""
        self._release(*self._pick_held(i))

    def _release(self, e: int, wf: str) -> None:
        self._step()
        row = self.rows[wf]
        mine = self.tracked[e].pop(wf, None)
        result = self.hosts[e].registry.release(wf)
        self._count("release", result.status)
        fresh = self._ingest_events()
        if mine is None:
            assert result.status == "not-held"
            assert fresh == []
        elif row.holder == mine:
            assert result.status == "released"
            assert self._shape(fresh) == [("release", mine.epoch, self.ids[e])]
            self._kill(wf)
            row.holder = None
        else:
            assert result.status == "lost-race"
            assert fresh == []

    @rule(e=engine_index, w=workflow_index)
    def takeover(self, e: int, w: int) -> None:
        self._takeover(e, self._wf(w))

    @rule(e=engine_index)
    def reclaim_scan(self, e: int) -> None:
        """An engine's maintenance pass tries to take over every held workflow."""
        for wf in self.wfs:
            if self.rows[wf].holder is not None:
                self._takeover(e, wf)

    def _takeover(self, e: int, wf: str) -> None:
        self._step()
        row = self.rows[wf]
        now = self.clocks[e].now
        until = self.cooldown[e].get(wf)
        result = takeover_with_retries(self.hosts[e].registry, wf)
        self._count("takeover", result.status)
        fresh = self._ingest_events()
        if until is not None and now < until:
            assert result.status == "backoff-skipped", result
            assert fresh == []
            return
        self.cooldown[e].pop(wf, None)
        old = row.holder
        if old is None:
            assert result.status == "no-claim", result
            assert fresh == []
            return
        if old.expires_at + self.grace >= now:
            assert (result.status, result.held_by, result.expires_at) == (
                "not-expired",
                old.engine_id,
                old.expires_at,
            ), result
            assert fresh == []
            return
        # Safety of the judgment: the old holder's OWN clock says its claim has expired.
        assert self.clocks[self.ids.index(old.engine_id)].now > old.expires_at, (
            "takeover while the holder still believes its claim is valid"
        )
        epoch = row.epoch + 1
        assert (result.status, result.epoch) == ("acquired", epoch), result
        assert self._shape(fresh) == [("takeover", epoch, self.ids[e])]
        (event,) = fresh
        assert (event.previous_engine_id, event.previous_expires_at) == (
            old.engine_id,
            old.expires_at,
        )
        assert event.at_ms > event.previous_expires_at + self.grace
        self._kill(wf)
        self._grant(e, wf, HolderRecord(self.ids[e], epoch, now + self.ttl, now))

    def _commit_rotation(self, snapshot: ClaimSnapshot) -> None:
        wf, row = snapshot.workflow_id, self.rows[snapshot.workflow_id]
        rotation = build_rotation(snapshot, actor="web", now=self.true_now, reason="cancel")
        result = conditional_batch(rotation.conditions, rotation.writes)
        self._count("rotation", "committed" if result.committed else "lost-race")
        fresh = self._ingest_events()
        if row.epoch == snapshot.epoch:
            assert result.committed
            assert self._shape(fresh) == [("rotate", row.epoch + 1, "web")]
            self._kill(wf)
            self.rows[wf] = ModelRow(row.epoch + 1, None)
        else:
            assert not result.committed
            assert result.failed_condition is rotation.conditions[0]
            assert fresh == []

    @rule(w=workflow_index, late=st.booleans())
    def external_rotation(self, w: int, late: bool) -> None:
        """A cancel from a web process: read the row, rotate it in the same batch --
        or (``late``) commit that rotation some steps after the read."""
        self._step()
        snapshot = self.hosts[0].registry.read(self._wf(w))
        if late:
            self.pending_rotations.append(snapshot)
        else:
            self._commit_rotation(snapshot)

    @precondition(lambda self: self.pending_rotations)
    @rule(i=st.integers(0, 10))
    def commit_late_rotation(self, i: int) -> None:
        self._step()
        self._commit_rotation(self.pending_rotations.pop(i % len(self.pending_rotations)))

    @rule(e=engine_index, w=workflow_index)
    def prepare_fold(self, e: int, w: int) -> None:
        """An engine reads the epoch for a folded acquire (a pickup), commits it later."""
        self._step()
        wf = self._wf(w)
        fold = prepare_claim_fold(self.hosts[e], wf)
        if wf in self.tracked[e]:
            assert fold is None
            return
        assert fold is not None
        assert fold.epoch == self.rows[wf].epoch + 1
        self.pending_folds.append(PendingFold(e, wf, fold, self.rows[wf].epoch))

    @precondition(lambda self: self.pending_folds)
    @rule(i=st.integers(0, 10))
    def commit_late_fold(self, i: int) -> None:
        self._step()
        pending = self.pending_folds.pop(i % len(self.pending_folds))
        e, wf, row = pending.engine, pending.workflow_id, self.rows[pending.workflow_id]
        result = commit_with_claim_fold(self.hosts[e], pending.fold, [], [])
        self._count("fold", result.status)
        fresh = self._ingest_events()
        if row.holder is None and row.epoch == pending.read_epoch:
            assert result.status == "committed"
            assert self._shape(fresh) == [("acquire", pending.fold.epoch, self.ids[e])]
            holder = pending.fold.holder
            assert holder is not None
            self._grant(e, wf, holder)
        else:
            assert (result.status, result.claim_conflict) == ("lost-race", True)
            assert fresh == []

    @rule(e=engine_index, w=workflow_index, held=st.booleans())
    def fenced_write(self, e: int, w: int, held: bool) -> None:
        """A write on an engine; ``held``: of a workflow it tracks (if any)."""
        if held and self._held():
            self._fenced_write(*self._pick_held(e + ENGINES * w))
        else:
            self._fenced_write(e, self._wf(w))

    def _fenced_write(self, e: int, wf: str) -> None:
        """A workflow write under the fence: bump the run's version."""
        self._step()
        row = self.rows[wf]
        mine = self.tracked[e].get(wf)
        current = (
            mine is not None
            and row.holder is not None
            and row.holder.engine_id == self.ids[e]
            and row.epoch == mine.epoch
        )
        bump = Update(WorkflowRun, {"pk": self.run_pk[wf]}, {"version": F("version") + 1})
        try:
            result = fenced_commit(self.hosts[e], wf, [], [bump])
        except EngineDeposedError as exc:
            self._count("fenced", "deposed")
            assert not current, "the current holder was refused its fenced write"
            assert exc.workflow_id == wf
            self.tracked[e].pop(wf, None)
        else:
            self._count("fenced", "committed")
            assert current, (
                f"{self.ids[e]} committed at epoch {mine.epoch if mine else None} "
                f"while the row is at {row.epoch} held by {row.holder}"
            )
            assert result.committed
            assert mine is not None
            self.seq += 1
            self.writes.append(FencedWrite(self.ids[e], wf, mine.epoch, self.seq))
        assert self._ingest_events() == []

    @rule(e=engine_index, w=workflow_index, which=wake_epoch, kind=wake_kind, held=st.booleans())
    def wake(self, e: int, w: int, which: int, kind: str, held: bool) -> None:
        """A wake on an engine; ``held``: of a workflow it tracks (if any)."""
        if held and self._held():
            self._wake(*self._pick_held(e + ENGINES * w), which, kind)
        else:
            self._wake(e, self._wf(w), which, kind)

    def _wake(self, e: int, wf: str, which: int, kind: str) -> None:
        """A wake scheduled under the tracked, an older, a past or the stored generation."""
        self._step()
        row = self.rows[wf]
        mine = self.tracked[e].get(wf)
        past = self.granted_to[e].get(wf, [0])
        expected_epoch = [
            None,
            (mine.epoch if mine is not None else row.epoch) - 1,
            past[which % len(past)],
            row.epoch,
        ][which]
        decision = confirm_wake_ownership(self.hosts[e], wf, kind, expected_epoch)  # type: ignore[arg-type]
        self._count("wake", decision)
        if mine is None:
            expected = "discard"
        else:
            epoch = expected_epoch if expected_epoch is not None else mine.epoch
            current = row.holder is not None and (row.holder.engine_id, row.holder.epoch) == (
                self.ids[e],
                epoch,
            )
            expected = "proceed" if current else "discard"
        assert decision == expected, (decision, expected_epoch, mine, row)
        if decision == "proceed":
            stored = WorkflowClaim.objects.get(pk=wf)
            holder = decode_holder_row(
                stored.engine_id, stored.epoch, stored.expires_at, stored.claimed_at
            )
            epoch = expected_epoch if expected_epoch is not None else mine.epoch  # type: ignore[union-attr]
            assert holder is not None and (holder.engine_id, holder.epoch) == (self.ids[e], epoch)

    # -- invariants ------------------------------------------------------------------
    @invariant()
    def database_matches_model(self) -> None:
        stored = {
            r[0]: r[1:]
            for r in WorkflowClaim.objects.values_list(
                "workflow_id", "epoch", "engine_id", "expires_at", "claimed_at"
            )
        }
        for wf, row in self.rows.items():
            h = row.holder
            expected = (
                (row.epoch, h.engine_id, h.expires_at, h.claimed_at)
                if h is not None
                else (row.epoch, None, None, None)
            )
            assert stored.get(wf, (0, None, None, None)) == expected, wf
        for e, host in enumerate(self.hosts):
            registry = host.registry
            assert registry is not None
            assert {wf: registry.holder(wf) for wf in registry.tracked()} == self.tracked[e]

    @invariant()
    def epochs_strictly_increase_and_releases_end_the_latest_grant(self) -> None:
        for wf, events in self.events.items():
            epoch, grant = 0, None
            for event in events:
                if event.kind in MINTS:
                    assert event.epoch == epoch + 1, (wf, event)
                    epoch = event.epoch
                    grant = (event.engine_id, epoch) if event.kind in GRANTS else None
                else:
                    assert event.kind == "release", event
                    assert grant == (event.engine_id, event.epoch), (wf, event)
                    grant = None
            assert self.rows[wf].epoch == epoch
            holder = self.rows[wf].holder
            # The holder is the latest grant: never a released/rotated/taken-over one.
            if holder is not None:
                assert (holder.engine_id, holder.epoch) == grant, (wf, holder, grant)
                assert (holder.engine_id, holder.epoch) not in self.dead[wf]
            else:
                assert grant is None, (wf, grant)

    @invariant()
    def every_fenced_write_was_at_the_current_generation(self) -> None:
        versions = dict(
            WorkflowRun.objects.filter(pk__in=self.run_pk.values()).values_list(
                "workflow_id", "version"
            )
        )
        for wf in self.wfs:
            assert versions[wf] == sum(1 for w in self.writes if w.workflow_id == wf)
        for write in self.writes:
            events = self.events[write.workflow_id]
            grants = [
                ev
                for ev in events
                if ev.kind in GRANTS and ev.epoch == write.epoch and ev.seq < write.seq
            ]
            assert [ev.engine_id for ev in grants] == [write.engine_id], write
            superseded = [
                ev
                for ev in events
                if ev.seq < write.seq
                and (ev.epoch > write.epoch or (ev.kind == "release" and ev.epoch == write.epoch))
            ]
            assert superseded == [], (write, superseded)


def _settings(soak: bool) -> settings:
    examples, steps = (SOAK_EXAMPLES, SOAK_STEPS) if soak else (DEFAULT_EXAMPLES, DEFAULT_STEPS)
    return settings(
        max_examples=examples,
        stateful_step_count=steps,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow],
    )


@pytest.mark.django_db(transaction=True)
def test_claim_protocol_model(soak: bool, capsys: pytest.CaptureFixture[str], vendor: str) -> None:
    ClaimProtocolMachine.examples_run = ClaimProtocolMachine.steps_run = 0
    ClaimProtocolMachine.outcomes = Counter()
    # Bound here, not at module level: pytest would collect a module-level
    # unittest class and run it without the database.
    case = ClaimProtocolMachine.TestCase
    case.settings = _settings(soak)
    started = time.monotonic()
    case("runTest").runTest()
    elapsed = time.monotonic() - started
    with capsys.disabled():
        print(
            f"\n[claim model/{vendor}] {ClaimProtocolMachine.examples_run} examples, "
            f"{ClaimProtocolMachine.steps_run} steps in {elapsed:.1f}s"
            + (" (soak)" if soak else "")
        )
        counts = sorted(ClaimProtocolMachine.outcomes.items())
        print("  " + ", ".join(f"{k}={v}" for k, v in counts))
    assert ClaimProtocolMachine.steps_run > 0
