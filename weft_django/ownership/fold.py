"""Claim fold (SPEC §4.6): acquire in the same batch as the enabling write.

A pending pickup, a child's start, a delayed-start fire, a resume or retry
pickup and ``continue_as_new`` must not first commit the run's new state
and then try to claim it (a crash in between leaves a running run nobody
owns) — the acquire's conditions and writes join the caller's own batch.
The registry tracks the claim only after that batch committed. A lost race
reports whether the *claim's* condition failed or the caller's own.

``commit_enabling_write`` is the whole decision for a write that makes a run
drivable by this engine, in every ownership mode: fold an acquire when the
claim is not held yet (taking over a stale holder once, if that is what
stood in the way), else commit under the fence.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal, NoReturn

from weft_django.errors import WorkflowClaimUnavailableError
from weft_django.ownership.fence import commit_with_folds, fenced_commit
from weft_django.ownership.host import OwnershipHost
from weft_django.ownership.ops import BatchResult, Condition, Write
from weft_django.ownership.registry import takeover_with_retries
from weft_django.ownership.results import AcquirePreparation

ClaimFold = AcquirePreparation
"""A prepared acquire (``workflow_id``, ``conditions``, ``writes``, ``epoch``,
``holder``); build a new one for every attempt."""


@dataclass(frozen=True)
class FoldResult:
    status: Literal["committed", "lost-race"]
    claim_conflict: bool = False
    batch: BatchResult | None = None

    @property
    def committed(self) -> bool:
        return self.status == "committed"


def prepare_claim_fold(host: OwnershipHost, workflow_id: str) -> ClaimFold | None:
    """``None`` when folding does not apply; otherwise a fresh acquire preparation."""
    registry = host.registry
    if host.ownership != "workflow-lease" or registry is None:
        return None
    if registry.current_epoch(workflow_id) is not None:
        return None
    return registry.prepare_acquire(workflow_id)


def commit_with_claim_fold(
    host: OwnershipHost,
    folds: ClaimFold | Iterable[ClaimFold] | None,
    conditions: Iterable[Condition],
    writes: Iterable[Write],
    *,
    savepoint: bool = True,
    track: bool = True,
) -> FoldResult:
    """Commit the caller's batch and every fold's acquire as ONE batch
    (``savepoint``, ``track``: as ``fence.commit_with_folds``'s)."""
    fold_list = [folds] if isinstance(folds, AcquirePreparation) else list(folds or ())
    result = commit_with_folds(
        host, conditions, writes, fold_list, savepoint=savepoint, track=track
    )
    if result.committed:
        return FoldResult("committed", batch=result)
    claim_conflict = any(result.failed_condition is c for f in fold_list for c in f.conditions)
    if claim_conflict:
        host.metrics.record_claim_attempt("lost_race")
    return FoldResult("lost-race", claim_conflict=claim_conflict, batch=result)


def commit_enabling_write(
    host: OwnershipHost,
    workflow_id: str,
    conditions: Iterable[Condition],
    writes: Iterable[Write],
) -> FoldResult:
    """Commit a write that makes ``workflow_id``'s run drivable by this engine.

    ``workflow-lease`` with the claim not held: the acquire is folded into
    the batch; when the claim's condition is what failed (a stale holder
    left by an earlier run) and a takeover succeeds, the write is committed
    once more under the fence. Claim held, ``lease`` or ``none``: one fenced
    commit. ``EngineDeposedError`` propagates from the fence as always.
    """
    conditions, writes = list(conditions), list(writes)
    fold = prepare_claim_fold(host, workflow_id)
    if fold is None:
        return _fenced(host, workflow_id, conditions, writes)
    result = commit_with_claim_fold(host, fold, conditions, writes)
    registry = host.registry
    if (
        result.claim_conflict
        and registry is not None
        and takeover_with_retries(registry, workflow_id).status == "acquired"
    ):
        return _fenced(host, workflow_id, conditions, writes)
    return result


def _fenced(
    host: OwnershipHost, workflow_id: str, conditions: list[Condition], writes: list[Write]
) -> FoldResult:
    batch = fenced_commit(host, workflow_id, conditions, writes)
    return FoldResult("committed" if batch.committed else "lost-race", batch=batch)


def raise_claim_unavailable(host: OwnershipHost, workflow_id: str) -> NoReturn:
    """Re-read the holder and raise ``WorkflowClaimUnavailableError`` naming it."""
    registry = host.registry
    held_by = None
    if registry is not None:
        holder = registry.read(workflow_id).holder
        held_by = holder.engine_id if holder is not None else None
    raise WorkflowClaimUnavailableError(workflow_id, held_by)


__all__ = [
    "ClaimFold",
    "FoldResult",
    "commit_enabling_write",
    "commit_with_claim_fold",
    "prepare_claim_fold",
    "raise_claim_unavailable",
]
