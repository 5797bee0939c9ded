"""Fenced workflow writes (SPEC §4.2): a deposed engine can never write.

Every write that belongs to a workflow — journal, status, timers — carries
the fence of the configured mode as one more condition of its batch:
``workflow-lease``: this engine holds that workflow's claim at the epoch it
tracks; ``lease``: this engine holds the store-wide lease at its epoch;
``none``: the run's version is the one this engine last saw. When the fence
is what failed, the engine was deposed: it stops driving that workflow
only (``EngineDeposedError`` + ``WeftWorkflowClaimLostWarning``); any other
failed condition is an ordinary lost race the caller handles.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from weft_django.errors import EngineDeposedError
from weft_django.ownership.batch import BatchResult, conditional_batch
from weft_django.ownership.host import OwnershipHost
from weft_django.ownership.loss import classify_loss
from weft_django.ownership.ops import Condition, LeaseCondition, RunCondition, Write
from weft_django.ownership.results import AcquirePreparation
from weft_django.ownership.transitions import fence_condition
from weft_django.warnings import warn_claim_lost


def fence_conditions(
    host: OwnershipHost, workflow_id: str, *, run_id: Any = None, run_version: int | None = None
) -> list[Condition]:
    """The fence for a write of ``workflow_id``; raises if nothing is held."""
    if host.ownership == "workflow-lease":
        registry = host.registry
        epoch = registry.current_epoch(workflow_id) if registry is not None else None
        if epoch is None:
            if registry is None or registry.losses.get(workflow_id) is None:
                # Not a loss already reported (by renewal): count it now.
                host.metrics.record_claim_attempt("deposed")
                warn_claim_lost(workflow_id, engine_id=host.engine_id, during="fenced-write")
            raise EngineDeposedError(workflow_id)
        return [fence_condition(workflow_id, epoch, host.engine_id)]
    if host.ownership == "lease":
        lease = host.lease
        if lease is None or lease.epoch is None or lease.deposed:
            raise EngineDeposedError(None)
        return [LeaseCondition(lease.epoch, lease.holder_id, "fence")]
    if run_id is not None and run_version is not None:
        return [RunCondition(run_id, version=run_version, label="fence")]
    return []


def commit_with_folds(
    host: OwnershipHost,
    conditions: Iterable[Condition],
    writes: Iterable[Write],
    folds: Sequence[AcquirePreparation] = (),
    *,
    savepoint: bool = True,
    track: bool = True,
) -> BatchResult:
    """ONE batch of the caller's conditions and writes plus every fold's
    acquire; the registry tracks the folded claims only once it committed
    (``savepoint``: as ``conditional_batch``'s).

    The one implementation under ``fenced_commit(..., folds=)`` and
    ``fold.commit_with_claim_fold``: a fold is never tracked before its
    batch is durable, and never tracked when the batch failed.
    ``track=False`` (with ``savepoint=False``: the caller's transaction is
    the batch's own and commits after this returns): the caller tracks each
    fold (``registry.record_folded_acquire``) once that transaction has
    committed. Tracked earlier, a renewal pass running before the commit
    reads the claim rows as they were (no holder), renews none of them and
    reports them lost, while the commit then leaves them held in the
    database by an engine that no longer drives them: their runs wait for
    expiry and takeover (seen at 50 engines, ``benchmarks/many_engines``).
    """
    result = conditional_batch(
        [*conditions, *(c for f in folds for c in f.conditions)],
        [*writes, *(w for f in folds for w in f.writes)],
        using=host.settings.database,
        savepoint=savepoint,
    )
    if track and result.committed and host.registry is not None:
        for fold in folds:
            host.registry.record_folded_acquire(fold)
    return result


def fenced_commit(
    host: OwnershipHost,
    workflow_id: str,
    conditions: Iterable[Condition],
    writes: Iterable[Write],
    *,
    run_id: Any = None,
    run_version: int | None = None,
    folds: Sequence[AcquirePreparation] = (),
) -> BatchResult:
    """Commit ``writes`` under the fence; ``EngineDeposedError`` when it fails.

    ``folds`` are claim acquisitions (a child's start) committed in the same
    batch; they are tracked only once it committed. A failed fold condition
    is returned as an ordinary lost race.
    """
    fence = fence_conditions(host, workflow_id, run_id=run_id, run_version=run_version)
    result = commit_with_folds(host, [*fence, *conditions], writes, folds)
    if result.committed:
        return result
    if not any(result.failed_condition is f for f in fence):
        return result
    failed = result.failed_condition
    failed_id = getattr(failed, "workflow_id", workflow_id)
    if host.ownership == "workflow-lease":
        registry = host.registry
        if registry is not None:
            # Who ended the generation (``ownership.loss``): read only now that
            # the fence failed, never on a write that committed.
            held = registry.current_epoch(failed_id)
            registry.forget(failed_id)
            loss = classify_loss(host.settings.database, failed_id, held)
            registry.record_loss(loss, during="fenced-write")
        else:
            host.metrics.record_claim_attempt("deposed")
            warn_claim_lost(failed_id, engine_id=host.engine_id, during="fenced-write")
        raise EngineDeposedError(failed_id)
    if host.ownership == "lease" and host.lease is not None:
        host.lease.handle_deposition("deposed")
    raise EngineDeposedError(workflow_id if host.ownership == "none" else None)
