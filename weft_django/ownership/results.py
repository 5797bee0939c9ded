"""What the claim registry returns: a lost race is a *result*, never an exception.

Each outcome is a frozen dataclass whose ``status`` is a closed ``Literal``,
so a caller matches on every case; ``AcquirePreparation`` is a fresh read
turned into the conditions and writes of an acquire, for a caller that folds
it into its own batch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from weft_django.ownership.codec import HolderRecord
from weft_django.ownership.ops import Condition, Write
from weft_django.ownership.transitions import Transition


@dataclass(frozen=True)
class AcquireResult:
    status: Literal["acquired", "lost-race"]
    workflow_id: str
    epoch: int | None = None
    held_by: str | None = None


@dataclass(frozen=True)
class TakeoverResult:
    status: Literal["acquired", "backoff-skipped", "no-claim", "not-expired", "lost-race"]
    workflow_id: str
    epoch: int | None = None
    held_by: str | None = None
    expires_at: int | None = None


@dataclass(frozen=True)
class RenewOutcome:
    workflow_id: str
    #: ``pending``: acquired in a transaction not committed when the pass
    #: read it (``ClaimRegistry._not_yet_visible``); still held, renewed next pass.
    status: Literal["renewed", "lost", "not-held", "pending"]


@dataclass(frozen=True)
class ReleaseResult:
    status: Literal["released", "lost-race", "not-held"]
    workflow_id: str


@dataclass(frozen=True)
class AcquirePreparation:
    """A fresh read turned into acquire conditions and writes; never reused.

    It is also what a claim fold carries (``fold.ClaimFold`` is this class):
    the acquire's conditions and writes join the caller's batch, and
    ``record_folded_acquire`` tracks it once that batch committed.
    """

    workflow_id: str
    transition: Transition

    @property
    def conditions(self) -> Sequence[Condition]:
        return self.transition.conditions

    @property
    def writes(self) -> Sequence[Write]:
        return self.transition.writes

    @property
    def epoch(self) -> int:
        return self.transition.epoch

    @property
    def holder(self) -> HolderRecord | None:
        """The holder the acquire installs."""
        return self.transition.holder


__all__ = [
    "AcquirePreparation",
    "AcquireResult",
    "ReleaseResult",
    "RenewOutcome",
    "TakeoverResult",
]
