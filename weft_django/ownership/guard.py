"""The wake guard (SPEC §4.7): no stale wake drives a workflow.

Every wake carries the generation it was scheduled under — ``(engine_id,
epoch)``. Before a wake resolves a waiter or drives a generator, the engine
re-reads the holder and compares the FULL generation: an engine that
released and re-acquired the same id has the same engine id at a newer
epoch, and an engine-id-only check would let the old generation's wake
drive the new one (ABA). A match is a cheap pre-check; the fenced write
that follows is the real backstop, which is why a *failed read* proceeds —
a fired timer must not be stranded by a database blip.

There is one guard: ``decide_wake`` decides (and, for a Celery pool
process, whose claims the node renews, adopts the claim the wake names);
``confirm_wake_ownership`` is that decision counted by kind, decision and
transport. A caller that must count later (after its own duplicate check)
calls ``decide_wake`` and then ``record_wake`` exactly once.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Literal

from weft_django.models import WorkflowClaim
from weft_django.ownership.codec import HolderRecord, decode_holder_row, holder_row_absent
from weft_django.ownership.host import OwnershipHost
from weft_django.warnings import WAKE_KINDS, WakeKind, warn_wake_discarded

logger = logging.getLogger("weft_django.ownership")

DiscardReason = Literal["holder-absent", "holder-undecodable", "generation-mismatch"]
WakeDecision = Literal["proceed", "discard"]


@dataclass(frozen=True)
class WakeCheckResult:
    status: Literal["match", "discarded"]
    reason: DiscardReason | None = None
    observed_engine_id: str | None = None
    observed_epoch: int | None = None

    def as_dict(self) -> dict[str, object]:
        if self.status == "match":
            return {"status": "match"}
        return {
            "status": "discarded",
            "reason": self.reason,
            "observed_engine_id": self.observed_engine_id,
            "observed_epoch": self.observed_epoch,
        }


def wake_ownership_check(
    *,
    workflow_id: str,
    wake_kind: WakeKind,
    expected_engine_id: str,
    expected_epoch: int,
    using: str = "default",
) -> WakeCheckResult:
    """Re-read the holder; ``match`` only when engine id AND epoch both agree."""
    row = (
        WorkflowClaim.objects.using(using)
        .filter(pk=workflow_id)
        .values_list("engine_id", "epoch", "expires_at", "claimed_at")
        .first()
    )
    if row is None or holder_row_absent(row[0], row[2], row[3]):
        return _discard(workflow_id, wake_kind, "holder-absent", None, None)
    holder = decode_holder_row(row[0], row[1], row[2], row[3])
    if holder is None:
        return _discard(workflow_id, wake_kind, "holder-undecodable", None, None)
    if holder.engine_id != expected_engine_id or holder.epoch != expected_epoch:
        return _discard(
            workflow_id, wake_kind, "generation-mismatch", holder.engine_id, holder.epoch
        )
    return WakeCheckResult("match")


def _discard(
    workflow_id: str,
    wake_kind: WakeKind,
    reason: DiscardReason,
    engine_id: str | None,
    epoch: int | None,
) -> WakeCheckResult:
    warn_wake_discarded(
        workflow_id, wake_kind, reason=reason, observed_engine_id=engine_id, observed_epoch=epoch
    )
    return WakeCheckResult("discarded", reason, engine_id, epoch)


@dataclass(frozen=True)
class WakeVerdict:
    """The guard's decision for one wake, and why (``reason`` on a discard).

    ``holder`` is the claim adopted for the turn (``adopt=True`` only).
    """

    decision: WakeDecision
    reason: str | None = None
    holder: HolderRecord | None = None


def confirm_wake_ownership(
    host: OwnershipHost,
    workflow_id: str,
    wake_kind: WakeKind,
    expected_epoch: int | None = None,
    *,
    expected_engine_id: str | None = None,
    transport: str = "local",
) -> WakeDecision:
    """``proceed`` or ``discard`` for a wake of ``workflow_id`` (SPEC §4.7), counted."""
    decision = decide_wake(
        host, workflow_id, wake_kind, expected_epoch, expected_engine_id=expected_engine_id
    ).decision
    record_wake(host, wake_kind, decision, transport)
    return decision


def record_wake(
    host: OwnershipHost, wake_kind: WakeKind, decision: WakeDecision, transport: str
) -> None:
    """Count one decided wake by kind, decision and transport (an unknown
    transport label is not counted: it must never change the decision)."""
    try:
        host.metrics.record_wake(wake_kind, decision, transport)  # type: ignore[arg-type]
    except ValueError:
        logger.debug("unrecorded wake transport %r", transport)


def decide_wake(
    host: OwnershipHost,
    workflow_id: str,
    wake_kind: WakeKind,
    expected_epoch: int | None = None,
    *,
    expected_engine_id: str | None = None,
    adopt: bool = False,
) -> WakeVerdict:
    """The guard's decision, uncounted (the caller counts it with ``record_wake``).

    ``adopt=True`` (engine scope: a Celery pool process, whose claims the
    node renews) also tracks the claim the wake names, so the turn's fenced
    writes carry it; a holder that changed between the check and the adopt
    is a discard, never a turn under a claim this process did not confirm.
    """
    verdict = _decide(host, workflow_id, wake_kind, expected_epoch, expected_engine_id)
    registry = host.registry
    if not adopt or verdict.decision == "discard" or registry is None:
        return verdict
    if host.ownership != "workflow-lease":
        return verdict
    epoch = expected_epoch if expected_epoch is not None else registry.current_epoch(workflow_id)
    holder = registry.adopt(workflow_id, epoch) if epoch is not None else None
    if holder is not None:
        return WakeVerdict("proceed", holder=holder)
    # The holder changed since the check: say why (the re-read warns) if it can.
    try:
        recheck = wake_ownership_check(
            workflow_id=workflow_id,
            wake_kind=wake_kind,
            expected_engine_id=host.engine_id,
            expected_epoch=epoch if epoch is not None else 0,
            using=host.settings.database,
        )
    except Exception:
        logger.warning("wake guard re-read failed for %s; discarding", workflow_id, exc_info=True)
    else:
        if recheck.status != "match":
            return WakeVerdict("discard", recheck.reason)  # the re-read warned
    warn_wake_discarded(
        workflow_id, wake_kind, reason="generation-mismatch", engine_id=host.engine_id
    )
    return WakeVerdict("discard", "generation-mismatch")


def _decide(
    host: OwnershipHost,
    workflow_id: str,
    wake_kind: WakeKind,
    expected_epoch: int | None,
    expected_engine_id: str | None,
) -> WakeVerdict:
    registry = host.registry
    if host.ownership != "workflow-lease" or registry is None:
        return WakeVerdict("proceed")
    if expected_engine_id is not None and expected_engine_id != host.engine_id:
        warn_wake_discarded(workflow_id, wake_kind, reason="other-engine", engine_id=host.engine_id)
        return WakeVerdict("discard", "other-engine")
    tracked = registry.current_epoch(workflow_id)
    # A standalone engine holds only what it tracks; a Celery node (scope
    # "engine") may confirm a claim a sibling pool process acquired.
    if tracked is None and registry.renew_scope != "engine":
        warn_wake_discarded(workflow_id, wake_kind, reason="not-held", engine_id=host.engine_id)
        return WakeVerdict("discard", "not-held")
    epoch = expected_epoch if expected_epoch is not None else tracked
    if epoch is None:
        warn_wake_discarded(workflow_id, wake_kind, reason="not-held", engine_id=host.engine_id)
        return WakeVerdict("discard", "not-held")
    try:
        result = wake_ownership_check(
            workflow_id=workflow_id,
            wake_kind=wake_kind,
            expected_engine_id=host.engine_id,
            expected_epoch=epoch,
            using=host.settings.database,
        )
    except Exception:  # a read blip: the fenced write that follows is the backstop
        logger.warning("wake guard read failed for %s; proceeding", workflow_id, exc_info=True)
        return WakeVerdict("proceed")
    if result.status == "match":
        return WakeVerdict("proceed")
    return WakeVerdict("discard", result.reason)


__all__ = [
    "WAKE_KINDS",
    "WakeCheckResult",
    "WakeVerdict",
    "confirm_wake_ownership",
    "decide_wake",
    "record_wake",
    "wake_ownership_check",
]
