"""The read rules applied to one loaded row, next to their database twins.

Why: ``querysets`` holds the filters ("alive", "expired"); a page that has
already loaded a row (an admin column, an API item) must judge it the same
way without another query. Each function here is the Python twin of one
queryset method, and takes the same inputs.

The takeover grace is the claim protocol's (``GRACE × CLAIM_RENEW_INTERVAL``,
SPEC §4.4): a holder inside its grace is still the owner.
"""

from __future__ import annotations

from typing import Final, Literal

from django.db.models import Q

from weft_django.conf import WeftSettings, get_settings
from weft_django.models import EngineRecord, WorkflowClaim
from weft_django.models.querysets import (
    ALIVE_HEARTBEAT_MULTIPLIER,
    alive_engines_q,
    alive_window_ms,
)
from weft_django.models.querysets import expired_claims_q as _expired_claims_q
from weft_django.ownership import WORKFLOW_CLAIM_TAKEOVER_GRACE_MULTIPLIER
from weft_django.ownership.codec import decode_holder_row
from weft_django.ownership.transitions import is_claim_expired

ClaimState = Literal["live", "expired", "released"]
CLAIM_STATES: Final[tuple[ClaimState, ...]] = ("live", "expired", "released")

RESET_MODE_TTL_MULTIPLIER: Final = 3
"""``weft_reset_mode`` is more cautious than "alive": an engine that
heartbeated within this many ``CLAIM_TTL`` s may still be running."""


def takeover_grace_ms(settings: WeftSettings | None = None) -> int:
    """How long past ``expires_at`` a holder still owns its claim."""
    settings = settings or get_settings()
    return WORKFLOW_CLAIM_TAKEOVER_GRACE_MULTIPLIER * settings.claim_renew_interval_ms


def reset_mode_window_ms(settings: WeftSettings | None = None) -> int:
    """How recent a heartbeat must be for ``weft_reset_mode`` to refuse."""
    settings = settings or get_settings()
    return RESET_MODE_TTL_MULTIPLIER * settings.claim_ttl_ms


def engine_is_alive(record: EngineRecord, now_ms: int, window_ms: int) -> bool:
    """The Python twin of ``EngineRecord.objects.alive()`` for one loaded row."""
    return record.stopped_at is None and record.heartbeat_at >= now_ms - window_ms


def claim_state(
    claim: WorkflowClaim, now_ms: int, settings: WeftSettings | None = None
) -> ClaimState:
    """``released`` (no holder), ``expired`` (another engine may take it over) or ``live``.

    Expired is the takeover judgement (``is_claim_expired``), not the bare
    ``expires_at``. A corrupt holder (half-null, an empty engine id, epoch < 1:
    anything the codec refuses) counts as expired, because engines take it
    over at once.
    """
    if claim.engine_id is None and claim.expires_at is None and claim.claimed_at is None:
        return "released"
    settings = settings or get_settings()
    holder = decode_holder_row(claim.engine_id, claim.epoch, claim.expires_at, claim.claimed_at)
    if holder is None or is_claim_expired(
        expires_at=holder.expires_at, now=now_ms, renew_interval_ms=settings.claim_renew_interval_ms
    ):
        return "expired"
    return "live"


def expired_claims_q(now_ms: int, settings: WeftSettings | None = None) -> Q:
    """``WorkflowClaim`` filter: the database twin of ``claim_state(...) == "expired"``."""
    return _expired_claims_q(now_ms, takeover_grace_ms(settings))


__all__ = [
    "ALIVE_HEARTBEAT_MULTIPLIER",
    "CLAIM_STATES",
    "RESET_MODE_TTL_MULTIPLIER",
    "ClaimState",
    "alive_engines_q",
    "alive_window_ms",
    "claim_state",
    "engine_is_alive",
    "expired_claims_q",
    "reset_mode_window_ms",
    "takeover_grace_ms",
]
