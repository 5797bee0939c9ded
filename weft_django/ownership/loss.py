"""Why a claim was lost: an operator's rotation, or a real deposition.

Why this module exists: an alert on ``outcome="deposed"`` or on
``weft_workflow_claim_renewal_failures_total`` must page only when another
engine took a workflow away (a stalled engine, a partition: split brain
averted by the fence). An operator's cancel, suspend, timeout, purge or
force release also ends the holder's generation (``operations.stop``
rotates the claim: epoch + 1, holder deleted), but that is ordinary use:
it is counted ``outcome="rotated"``, logged at INFO saying what happened
("cancelled by an operator"), and never as a renewal failure or a
``WeftWorkflowClaimLostWarning``.

How the engine tells: every claim transition writes its ``ClaimEvent`` in
the batch that makes it, so the event at the generation right after the
one this engine held (``epoch + 1``) says who ended it -- ``rotate`` /
``force_release`` (an operator, the run's own timeout) or ``takeover`` (an
engine). ONE read, made only when a loss was found (never on a renewal
that lost nothing), also returns the workflow's latest run status, which
names the stop. A loss with no such event (history pruned, a foreign row)
is reported as a deposition: an alert that fires wrongly is safer than
one that stays silent.

The fencing itself is unchanged: whatever the cause, the engine stops
driving that workflow, and its next fenced write would fail anyway.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

from django.db.models import OuterRef, Q, Subquery

from weft_django.ownership.metrics import ClaimMetrics
from weft_django.warnings import warn_claim_lost

logger = logging.getLogger("weft_django.ownership")
#: Where ``engine.drive`` logged a deposition before this module existed.
engine_logger = logging.getLogger("weft_django.engine")

LossKind = Literal["rotated", "deposed"]

#: Claim event kinds that end a generation without another engine taking it.
ROTATION_KINDS: Final[frozenset[str]] = frozenset({"rotate", "force_release"})

#: The latest run's status after a rotation -> what the log line says.
_STOPPED: Final[dict[str, str]] = {
    "cancelled": "cancelled",
    "suspended": "suspended",
    "timed_out": "timed out",
    "terminated": "terminated",
}

#: At most this many ``(workflow_id, epoch)`` pairs per read.
_CHUNK: Final[int] = 200


@dataclass(frozen=True)
class ClaimLoss:
    """One lost claim generation and who ended it."""

    workflow_id: str
    epoch: int
    kind: LossKind
    #: ``cancelled``, ``suspended``, ``timed out``, ``cancel requested``,
    #: ``purged``, ``force released``, ``rotated`` (rotations); ``taken over``
    #: or ``lost`` (depositions).
    what: str = "lost"
    #: The ``ClaimEvent.engine_id`` of the event (``client``, ``admin:<user>``,
    #: an engine id); empty when unknown.
    actor: str = ""
    reason: str = ""

    @property
    def by_operator(self) -> bool:
        return self.kind == "rotated"


def _describe(kind: str, reason: str, run_status: str | None) -> str:
    if kind == "force_release":
        return "force released"
    if reason == "cancel requested":
        return "cancel requested"
    if run_status is None:
        return "purged"
    if run_status in _STOPPED:
        return _STOPPED[run_status]
    return "rotated"


def classify_losses(using: str, lost: Mapping[str, int]) -> dict[str, ClaimLoss]:
    """Classify each ``workflow_id -> epoch held`` in ``lost`` (one read per 200)."""
    from weft_django.models import ClaimEvent, WorkflowRun

    found: dict[str, ClaimLoss] = {}
    items = list(lost.items())
    for start in range(0, len(items), _CHUNK):
        chunk = items[start : start + _CHUNK]
        match = Q()
        for wid, epoch in chunk:
            match |= Q(workflow_id=wid, epoch=int(epoch) + 1)
        latest_status = Subquery(
            WorkflowRun.objects.using(using)
            .filter(workflow_id=OuterRef("workflow_id"))
            .order_by("-created_at", "-pk")
            .values("status")[:1]
        )
        rows = (
            ClaimEvent.objects.using(using)
            .filter(match)
            .annotate(run_status=latest_status)
            .order_by("id")
            .values_list("workflow_id", "kind", "engine_id", "reason", "run_status")
        )
        for wid, kind, actor, reason, run_status in rows:
            if wid in found:
                continue  # the first event of that generation decides
            epoch = int(lost[wid])
            if kind in ROTATION_KINDS:
                what = _describe(kind, reason, run_status)
                found[wid] = ClaimLoss(wid, epoch, "rotated", what, actor, reason)
            else:
                found[wid] = ClaimLoss(wid, epoch, "deposed", "taken over", actor, reason)
    for wid, epoch in lost.items():
        found.setdefault(wid, ClaimLoss(wid, int(epoch), "deposed"))
    return found


def classify_loss(using: str, workflow_id: str, epoch: int | None) -> ClaimLoss:
    """Classify one loss; an unknown epoch (nothing tracked) is a deposition."""
    if epoch is None:
        return ClaimLoss(workflow_id, 0, "deposed")
    try:
        return classify_losses(using, {workflow_id: epoch})[workflow_id]
    except Exception:  # the read failed: report the conservative answer
        logger.debug("could not classify the loss of %s", workflow_id, exc_info=True)
        return ClaimLoss(workflow_id, int(epoch), "deposed")


def describe_rotation(loss: ClaimLoss) -> str:
    """``cancelled by an operator``, ``timed out at its execution deadline`` ..."""
    if loss.what == "timed out":
        return "timed out at its execution deadline"
    return f"{loss.what} by an operator"


class ReportedLosses:
    """The generations this engine already reported lost (bounded, thread-safe).

    Why: the renewal pass, the fence before a write and the fenced write
    itself may each notice the same loss; it is counted and logged once.
    """

    def __init__(self, limit: int = 4096) -> None:
        self._limit = limit
        self._seen: OrderedDict[str, ClaimLoss] = OrderedDict()
        self._lock = threading.Lock()

    def add(self, loss: ClaimLoss) -> bool:
        """Remember ``loss``; False when that generation was already reported."""
        with self._lock:
            known = self._seen.get(loss.workflow_id)
            if known is not None and known.epoch == loss.epoch and loss.epoch:
                return False
            self._seen[loss.workflow_id] = loss
            self._seen.move_to_end(loss.workflow_id)
            while len(self._seen) > self._limit:
                self._seen.popitem(last=False)
            return True

    def get(self, workflow_id: str) -> ClaimLoss | None:
        with self._lock:
            return self._seen.get(workflow_id)

    def discard(self, workflow_id: str) -> None:
        with self._lock:
            self._seen.pop(workflow_id, None)


def log_stopped_driving(engine: Any, workflow_id: str) -> None:
    """A turn ended on ``EngineDeposedError``: INFO after a rotation, else WARNING."""
    registry = getattr(engine, "registry", None)
    loss = registry.losses.get(workflow_id) if registry is not None else None
    if loss is not None and loss.kind == "rotated":
        logger.info(
            'engine %s stopped driving "%s": it was %s',
            engine.engine_id,
            workflow_id,
            describe_rotation(loss),
        )
        return
    engine_logger.warning("engine %s was deposed from %s", engine.engine_id, workflow_id)


def report_loss(
    loss: ClaimLoss,
    metrics: ClaimMetrics,
    *,
    engine_id: str,
    during: str,
    renewal: bool = False,
) -> None:
    """Count and log one loss: ``rotated`` at INFO, a deposition as today.

    ``renewal``: found by the renewal pass (a deposition found there is also
    a renewal failure; a rotation never is).
    """
    if loss.kind == "rotated":
        metrics.record_claim_attempt("rotated")
        # The stop's free-text reason is the caller's (it may carry anything a
        # user typed): only the closed ``what`` and the actor are logged.
        logger.info(
            'workflow "%s" was %s (%s): its claim at epoch %s was rotated, so this engine '
            "stops driving it; no other engine took it, nothing is wrong",
            loss.workflow_id,
            describe_rotation(loss),
            loss.actor or "unknown actor",
            loss.epoch,
            extra={
                "weft": {
                    "event": "workflow_claim_rotated",
                    "workflow_id": loss.workflow_id,
                    "epoch": loss.epoch,
                    "what": loss.what,
                    "actor": loss.actor,
                    "engine_id": engine_id,
                    "during": during,
                }
            },
        )
        return
    if renewal:
        metrics.record_renewal_failure()
    metrics.record_claim_attempt("deposed")
    warn_claim_lost(loss.workflow_id, engine_id=engine_id, epoch=loss.epoch, during=during)


__all__ = [
    "ROTATION_KINDS",
    "ClaimLoss",
    "LossKind",
    "ReportedLosses",
    "classify_loss",
    "classify_losses",
    "describe_rotation",
    "log_stopped_driving",
    "report_loss",
]
