"""The claim and wake counters as a value: closed label sets, a snapshot of the
counters, its arithmetic and its JSON form (SPEC §4.8).

The invariant protected here: **every label value is a member of a closed set**, so
no workflow id or engine id can become a Prometheus label and traffic cannot blow up
the metrics store. A snapshot is what an engine stores in ``EngineRecord.metrics`` at
each heartbeat (``to_json``) and what a collector reads back (``from_json``): fail-closed
and never raising, it drops unknown keys, labels outside the closed sets and values
that are not counts; the collector sums the snapshots of every engine with ``+``.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal, TypeGuard, TypeVar, get_args

from weft_django.kernel.vocab import (
    WAKE_KINDS,
    WAKE_TRANSPORTS,
    ClaimAttemptOutcome,
    WakeKind,
    WakeTransport,
)
from weft_django.metrics.business import BusinessSnapshot
from weft_django.models.choices import RUN_STATUSES

__all__ = [
    "CLAIM_ATTEMPT_OUTCOMES",
    "CLOSED_LABEL_SETS",
    "RUN_STATUS_LABELS",
    "WAKE_DECISIONS",
    "ClaimMetricsSnapshot",
    "WakeDecision",
    "WakeKey",
    "closed_wakes",
    "count_or_zero",
    "is_count",
    "label_value_is_closed",
    "zero_attempts",
]

CLAIM_ATTEMPT_OUTCOMES: Final[tuple[ClaimAttemptOutcome, ...]] = get_args(ClaimAttemptOutcome)

WakeDecision = Literal["proceed", "discard"]
WAKE_DECISIONS: Final[tuple[WakeDecision, ...]] = get_args(WakeDecision)

WakeKey = tuple[WakeKind, WakeDecision, WakeTransport]

RUN_STATUS_LABELS: Final[tuple[str, ...]] = tuple(str(status) for status in RUN_STATUSES)
"""Run statuses (SPEC §2) as the closed value set of the exporter's ``status`` label."""

CLOSED_LABEL_SETS: Final[Mapping[str, tuple[str, ...]]] = {
    "outcome": CLAIM_ATTEMPT_OUTCOMES,
    "kind": WAKE_KINDS,
    "decision": WAKE_DECISIONS,
    "transport": WAKE_TRANSPORTS,
    "status": RUN_STATUS_LABELS,
}
"""Label name -> its closed value set. The only other label values are type
names (``business_metrics``: registered names, else ``"other"``, capped) and
histogram bounds; no label carries an engine id (it changes at every restart)."""

_JSON_VERSION: Final[int] = 1
_L = TypeVar("_L", bound=str)


def label_value_is_closed(name: str, value: object) -> bool:
    """True if ``value`` belongs to the closed value set of label ``name``.

    False for an unknown label name (including ``engine_id``) or any non-member.
    """
    allowed = CLOSED_LABEL_SETS.get(name)
    return allowed is not None and isinstance(value, str) and value in allowed


def is_count(v: object) -> TypeGuard[int]:
    """A count: a non-negative ``int`` (not a ``bool``)."""
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def zero_attempts() -> dict[ClaimAttemptOutcome, int]:
    """Every claim-attempt outcome at 0."""
    return dict.fromkeys(CLAIM_ATTEMPT_OUTCOMES, 0)


@dataclass(frozen=True)
class ClaimMetricsSnapshot:
    """A point-in-time copy of one engine's (or a sum of engines') counters."""

    attempts: dict[ClaimAttemptOutcome, int] = field(default_factory=zero_attempts)
    active_claims: int = 0
    renewal_failures: int = 0
    wakes: dict[WakeKey, int] = field(default_factory=dict)
    abandoned_activity_threads: int = 0
    """Sync activity threads abandoned while still running (a timeout, a
    heartbeat timeout, a result no longer wanted): Python cannot stop them."""
    workflow_cache_hits: int = 0
    """Turns that resumed their run's cached replay (``engine.workflow_cache``)."""
    workflow_cache_misses: int = 0
    """Turns of an engine with the cache on that found no valid cached replay
    (never cached, evicted, the epoch or the run's version moved, other code
    registered): each replayed the journal in full."""
    workflow_crash_loops: int = 0
    """Runs suspended with ``CrashLoopError``: their turns kept dying with their
    engine (``WEFT["MAX_RECOVERY_ATTEMPTS"]`` in a row, ``engine.turn.failures``)."""
    business: BusinessSnapshot = field(default_factory=BusinessSnapshot)
    """Run ends and activity attempts by type name (``business_metrics``)."""

    @property
    def workflow_cache_hit_rate(self) -> float | None:
        """Hits over looks in the workflow cache; ``None`` before the first look."""
        looks = self.workflow_cache_hits + self.workflow_cache_misses
        return self.workflow_cache_hits / looks if looks > 0 else None

    def __add__(self, other: ClaimMetricsSnapshot) -> ClaimMetricsSnapshot:
        if not isinstance(other, ClaimMetricsSnapshot):
            return NotImplemented
        attempts = {
            o: self.attempts.get(o, 0) + other.attempts.get(o, 0) for o in CLAIM_ATTEMPT_OUTCOMES
        }
        wakes = dict(self.wakes)
        for key, n in other.wakes.items():
            wakes[key] = wakes.get(key, 0) + n
        return ClaimMetricsSnapshot(
            attempts=attempts,
            active_claims=self.active_claims + other.active_claims,
            renewal_failures=self.renewal_failures + other.renewal_failures,
            wakes=wakes,
            abandoned_activity_threads=(
                self.abandoned_activity_threads + other.abandoned_activity_threads
            ),
            workflow_cache_hits=self.workflow_cache_hits + other.workflow_cache_hits,
            workflow_cache_misses=self.workflow_cache_misses + other.workflow_cache_misses,
            workflow_crash_loops=self.workflow_crash_loops + other.workflow_crash_loops,
            business=self.business + other.business,
        )

    def __sub__(self, other: ClaimMetricsSnapshot) -> ClaimMetricsSnapshot:
        """The counters recorded since ``other`` (an earlier snapshot of the same
        recorder). ``active_claims`` is a gauge, not a counter: the delta has 0.
        Wake keys whose count did not change are left out."""
        if not isinstance(other, ClaimMetricsSnapshot):
            return NotImplemented
        return ClaimMetricsSnapshot(
            attempts={
                o: self.attempts.get(o, 0) - other.attempts.get(o, 0)
                for o in CLAIM_ATTEMPT_OUTCOMES
            },
            active_claims=0,
            renewal_failures=self.renewal_failures - other.renewal_failures,
            wakes={
                k: n - other.wakes.get(k, 0)
                for k, n in self.wakes.items()
                if n != other.wakes.get(k, 0)
            },
            abandoned_activity_threads=(
                self.abandoned_activity_threads - other.abandoned_activity_threads
            ),
            workflow_cache_hits=self.workflow_cache_hits - other.workflow_cache_hits,
            workflow_cache_misses=self.workflow_cache_misses - other.workflow_cache_misses,
            workflow_crash_loops=self.workflow_crash_loops - other.workflow_crash_loops,
            business=self.business - other.business,
        )

    def is_zero(self) -> bool:
        """No counter moved (the ``active_claims`` gauge is not a counter)."""
        return (
            not any(self.attempts.values())
            and not self.renewal_failures
            and not self.wakes
            and not self.abandoned_activity_threads
            and not self.workflow_cache_hits
            and not self.workflow_cache_misses
            and not self.workflow_crash_loops
            and self.business.is_zero()
        )

    def __radd__(self, other: object) -> ClaimMetricsSnapshot:
        # Lets the builtin ``sum(snapshots)`` start from 0.
        if other == 0:
            return self
        if isinstance(other, ClaimMetricsSnapshot):
            return other + self
        return NotImplemented

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict (what ``EngineRecord.metrics`` stores)."""
        wakes = [
            {"kind": kind, "decision": decision, "transport": transport, "count": n}
            for (kind, decision, transport), n in closed_wakes(self)
        ]
        return {
            "version": _JSON_VERSION,
            "attempts": {o: count_or_zero(self.attempts.get(o)) for o in CLAIM_ATTEMPT_OUTCOMES},
            "active_claims": count_or_zero(self.active_claims),
            "renewal_failures": count_or_zero(self.renewal_failures),
            "wakes": wakes,
            "abandoned_activity_threads": count_or_zero(self.abandoned_activity_threads),
            "workflow_cache_hits": count_or_zero(self.workflow_cache_hits),
            "workflow_cache_misses": count_or_zero(self.workflow_cache_misses),
            "workflow_crash_loops": count_or_zero(self.workflow_crash_loops),
            "business": self.business.to_json(),
        }

    @classmethod
    def from_json(cls, data: object) -> ClaimMetricsSnapshot:
        """Read ``to_json()`` output back. Fail-closed and never raises: unknown
        keys, labels outside the closed sets and non-count values (``bool``,
        ``float``, negatives, strings) are ignored; garbage gives a zero snapshot.
        """
        try:
            return cls._from_json(data)
        except Exception:  # defensive: hostile mappings; a collector must never crash
            return cls()

    @classmethod
    def _from_json(cls, data: object) -> ClaimMetricsSnapshot:
        if not isinstance(data, Mapping):
            return cls()
        attempts = zero_attempts()
        raw_attempts = data.get("attempts")
        if isinstance(raw_attempts, Mapping):
            for outcome in CLAIM_ATTEMPT_OUTCOMES:
                n = raw_attempts.get(outcome)
                if is_count(n):
                    attempts[outcome] = int(n)
        active = data.get("active_claims")
        failures = data.get("renewal_failures")
        abandoned = data.get("abandoned_activity_threads")
        hits = data.get("workflow_cache_hits")
        misses = data.get("workflow_cache_misses")
        loops = data.get("workflow_crash_loops")
        wakes: dict[WakeKey, int] = {}
        raw_wakes = data.get("wakes")
        if isinstance(raw_wakes, list):
            for item in raw_wakes:
                key = _wake_key_from_json(item)
                if key is not None and isinstance(item, Mapping):
                    n = item.get("count")
                    if is_count(n):
                        wakes[key] = wakes.get(key, 0) + int(n)
        return cls(
            attempts=attempts,
            active_claims=int(active) if is_count(active) else 0,
            renewal_failures=int(failures) if is_count(failures) else 0,
            wakes=wakes,
            abandoned_activity_threads=int(abandoned) if is_count(abandoned) else 0,
            workflow_cache_hits=int(hits) if is_count(hits) else 0,
            workflow_cache_misses=int(misses) if is_count(misses) else 0,
            workflow_crash_loops=int(loops) if is_count(loops) else 0,
            business=BusinessSnapshot.from_json(data.get("business")),
        )


def _closed_wake_keys() -> Iterator[WakeKey]:
    """Every possible wake label triple, in closed-set order (6 x 2 x 4 = 48)."""
    return itertools.product(WAKE_KINDS, WAKE_DECISIONS, WAKE_TRANSPORTS)


def _member(value: object, allowed: tuple[_L, ...]) -> _L | None:
    """The canonical member of ``allowed`` equal to ``value``, else ``None``."""
    if not isinstance(value, str):
        return None
    return next((a for a in allowed if a == value), None)


def _wake_key_from_json(item: object) -> WakeKey | None:
    if not isinstance(item, Mapping):
        return None
    kind = _member(item.get("kind"), WAKE_KINDS)
    decision = _member(item.get("decision"), WAKE_DECISIONS)
    transport = _member(item.get("transport"), WAKE_TRANSPORTS)
    if kind is None or decision is None or transport is None:
        return None
    return (kind, decision, transport)


def count_or_zero(v: object) -> int:
    """``v`` if it is a count, else 0 (a junk value never reaches a reader)."""
    return int(v) if is_count(v) else 0


def closed_wakes(snapshot: ClaimMetricsSnapshot) -> list[tuple[WakeKey, int]]:
    """Recorded wake counts in closed-set order; keys outside the closed sets are skipped."""
    wakes = snapshot.wakes
    return [(k, count_or_zero(wakes[k])) for k in _closed_wake_keys() if k in wakes]
