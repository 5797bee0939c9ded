"""Claim fold (SPEC §4.6): acquire in the same batch as the enabling write.

A pending pickup, a child's start, a delayed-start fire, a resume or retry
pickup and ``continue_as_new`` must not first commit the run's new state
and then try to claim it (a crash in between leaves a running run nobody
owns) — the acquire's conditions and writes join the caller's own batch.
The registry tracks the claim only after that batch committed. A lost race
reports whether the *claim's* condition failed or the caller's own.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal, NoReturn

from weft_django.errors import WorkflowClaimUnavailableError
from weft_django.ownership.batch import BatchResult, Condition, Write, conditional_batch
from weft_django.ownership.host import OwnershipHost
from weft_django.ownership.registry import AcquirePreparation


@dataclass(frozen=True)
class ClaimFold:
    """A prepared acquire; build a new one for every attempt."""

    workflow_id: str
    preparation: AcquirePreparation

    @property
    def conditions(self) -> Sequence[Condition]:
        return self.preparation.transition.conditions

    @property
    def writes(self) -> Sequence[Write]:
        return self.preparation.transition.writes

    @property
    def epoch(self) -> int:
        return self.preparation.transition.epoch


@dataclass(frozen=True)
class FoldResult:
    status: Literal["committed", "lost-race"]
    claim_conflict: bool = False
    batch: BatchResult | None = None


def prepare_claim_fold(host: OwnershipHost, workflow_id: str) -> ClaimFold | None:
    """``None`` when folding does not apply; otherwise a fresh acquire preparation."""
    registry = host.registry
    if host.ownership != "workflow-lease" or registry is None:
        return None
    if registry.current_epoch(workflow_id) is not None:
        return None
    return ClaimFold(workflow_id, registry.prepare_acquire(workflow_id))


def commit_with_claim_fold(
    host: OwnershipHost,
    folds: ClaimFold | Iterable[ClaimFold] | None,
    conditions: Iterable[Condition],
    writes: Iterable[Write],
) -> FoldResult:
    """Commit the caller's batch and every fold's acquire as ONE batch."""
    fold_list = [folds] if isinstance(folds, ClaimFold) else list(folds or ())
    fold_conditions = [c for f in fold_list for c in f.conditions]
    result = conditional_batch(
        [*conditions, *fold_conditions],
        [*writes, *(w for f in fold_list for w in f.writes)],
        using=host.settings.database,
    )
    registry = host.registry
    if result.committed:
        if registry is not None:
            for fold in fold_list:
                registry.record_folded_acquire(fold.preparation)
        return FoldResult("committed", batch=result)
    claim_conflict = any(result.failed_condition is c for c in fold_conditions)
    if claim_conflict:
        host.metrics.record_claim_attempt("lost_race")
    return FoldResult("lost-race", claim_conflict=claim_conflict, batch=result)


def raise_claim_unavailable(host: OwnershipHost, workflow_id: str) -> NoReturn:
    """Re-read the holder and raise ``WorkflowClaimUnavailableError`` naming it."""
    registry = host.registry
    held_by = None
    if registry is not None:
        holder = registry.read(workflow_id).holder
        held_by = holder.engine_id if holder is not None else None
    raise WorkflowClaimUnavailableError(workflow_id, held_by)
