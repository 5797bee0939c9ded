"""Bounded-cardinality claim and wake counters for one engine (SPEC §4.8).

Why this module exists: operators need to see claim churn (acquisitions,
takeovers, lost races, depositions, cooldown skips), how many claims an
engine holds, renewal failures, how wakes are decided, how many sync
activity threads were abandoned still running, and how often a turn found
its run's replay in the workflow cache -- without ever
turning a workflow id into a Prometheus label, which would let traffic blow
up the metrics store. The invariant protected here: **every label value is a
member of a closed set**. There is no API that accepts a free-form label;
each ``record_*`` method validates its arguments against a closed tuple and
raises ``ValueError`` otherwise, and the text exporter iterates the closed
sets rather than the stored keys.

Counters are pure Python (no ``prometheus_client``). An engine writes
``ClaimMetrics.to_json()`` into ``EngineRecord.metrics`` at each heartbeat;
the optional collector (``weft_django.metrics_export``) reads those JSON
documents back with the fail-closed ``ClaimMetricsSnapshot.from_json`` and
sums them with ``+`` so any process can serve the cluster's totals. Over
400 lines: each counter family, its snapshot arithmetic and its exposition
are one list that must stay in step, read as one.
"""

from __future__ import annotations

import itertools
import threading
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
from weft_django.metrics.business import (
    BusinessMetrics,
    BusinessSnapshot,
    exposition_lines,
)
from weft_django.models.choices import RUN_STATUSES

__all__ = [
    "CLAIM_ATTEMPT_OUTCOMES",
    "CLOSED_LABEL_SETS",
    "RUN_STATUS_LABELS",
    "WAKE_DECISIONS",
    "WAKE_KINDS",
    "WAKE_TRANSPORTS",
    "ClaimAttemptOutcome",
    "ClaimMetrics",
    "ClaimMetricsSnapshot",
    "WakeDecision",
    "WakeKey",
    "WakeTransport",
    "label_value_is_closed",
    "to_prometheus_text",
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


def _is_count(v: object) -> TypeGuard[int]:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def _check(name: str, value: object, allowed: tuple[str, ...]) -> None:
    if not (isinstance(value, str) and value in allowed):
        raise ValueError(f"{name} must be one of {', '.join(allowed)}; got {value!r:.80}")


def _check_count(name: str, value: object) -> int:
    if not _is_count(value):
        raise ValueError(f"{name} must be a non-negative int, got {value!r:.80}")
    return int(value)


def _zero_attempts() -> dict[ClaimAttemptOutcome, int]:
    return dict.fromkeys(CLAIM_ATTEMPT_OUTCOMES, 0)


@dataclass(frozen=True)
class ClaimMetricsSnapshot:
    """A point-in-time copy of one engine's (or a sum of engines') counters."""

    attempts: dict[ClaimAttemptOutcome, int] = field(default_factory=_zero_attempts)
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
            for (kind, decision, transport), n in _closed_wakes(self)
        ]
        return {
            "version": _JSON_VERSION,
            "attempts": {o: _count_or_zero(self.attempts.get(o)) for o in CLAIM_ATTEMPT_OUTCOMES},
            "active_claims": _count_or_zero(self.active_claims),
            "renewal_failures": _count_or_zero(self.renewal_failures),
            "wakes": wakes,
            "abandoned_activity_threads": _count_or_zero(self.abandoned_activity_threads),
            "workflow_cache_hits": _count_or_zero(self.workflow_cache_hits),
            "workflow_cache_misses": _count_or_zero(self.workflow_cache_misses),
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
        attempts = _zero_attempts()
        raw_attempts = data.get("attempts")
        if isinstance(raw_attempts, Mapping):
            for outcome in CLAIM_ATTEMPT_OUTCOMES:
                n = raw_attempts.get(outcome)
                if _is_count(n):
                    attempts[outcome] = int(n)
        active = data.get("active_claims")
        failures = data.get("renewal_failures")
        abandoned = data.get("abandoned_activity_threads")
        hits = data.get("workflow_cache_hits")
        misses = data.get("workflow_cache_misses")
        wakes: dict[WakeKey, int] = {}
        raw_wakes = data.get("wakes")
        if isinstance(raw_wakes, list):
            for item in raw_wakes:
                key = _wake_key_from_json(item)
                if key is not None and isinstance(item, Mapping):
                    n = item.get("count")
                    if _is_count(n):
                        wakes[key] = wakes.get(key, 0) + int(n)
        return cls(
            attempts=attempts,
            active_claims=int(active) if _is_count(active) else 0,
            renewal_failures=int(failures) if _is_count(failures) else 0,
            wakes=wakes,
            abandoned_activity_threads=int(abandoned) if _is_count(abandoned) else 0,
            workflow_cache_hits=int(hits) if _is_count(hits) else 0,
            workflow_cache_misses=int(misses) if _is_count(misses) else 0,
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


def _count_or_zero(v: object) -> int:
    return int(v) if _is_count(v) else 0


def _closed_wakes(snapshot: ClaimMetricsSnapshot) -> list[tuple[WakeKey, int]]:
    """Recorded wake counts in closed-set order; keys outside the closed sets are skipped."""
    wakes = snapshot.wakes
    return [(k, _count_or_zero(wakes[k])) for k in _closed_wake_keys() if k in wakes]


class ClaimMetrics:
    """Thread-safe in-memory counters, one instance per engine process.

    Every mutator validates its labels against the closed sets and raises
    ``ValueError`` (naming the bad value and the allowed ones) otherwise.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._attempts = _zero_attempts()
        self._active_claims = 0
        self._renewal_failures = 0
        self._wakes: dict[WakeKey, int] = {}
        self._abandoned_activity_threads = 0
        self._workflow_cache_hits = 0
        self._workflow_cache_misses = 0
        #: Run ends and activity attempts by type name (its own lock).
        self.business = BusinessMetrics()

    def record_claim_attempt(self, outcome: ClaimAttemptOutcome) -> None:
        """Count one claim attempt with ``outcome`` (one of ``CLAIM_ATTEMPT_OUTCOMES``)."""
        _check("claim attempt outcome", outcome, CLAIM_ATTEMPT_OUTCOMES)
        with self._lock:
            self._attempts[outcome] += 1

    def set_active_claims(self, n: int) -> None:
        """Set (absolute, not a delta) how many claims this engine holds now."""
        value = _check_count("active claims", n)
        with self._lock:
            self._active_claims = value

    def record_renewal_failure(self, n: int = 1) -> None:
        """Count ``n`` renewal failures (claims found lost at renewal)."""
        value = _check_count("renewal failures", n)
        with self._lock:
            self._renewal_failures += value

    def record_abandoned_activity_thread(self, n: int = 1) -> None:
        """Count ``n`` sync activity threads abandoned while still running."""
        value = _check_count("abandoned activity threads", n)
        with self._lock:
            self._abandoned_activity_threads += value

    def record_workflow_cache_lookup(self, *, hit: bool) -> None:
        """Count one turn's look in the workflow cache: ``hit`` if it resumed
        the cached replay, else a miss (it replays the journal in full)."""
        if not isinstance(hit, bool):
            raise ValueError(f"workflow cache hit must be a bool, got {hit!r:.80}")
        with self._lock:
            if hit:
                self._workflow_cache_hits += 1
            else:
                self._workflow_cache_misses += 1

    def record_wake(self, kind: WakeKind, decision: WakeDecision, transport: WakeTransport) -> None:
        """Count one wake of ``kind`` decided ``decision`` that arrived by ``transport``."""
        _check("wake kind", kind, WAKE_KINDS)
        _check("wake decision", decision, WAKE_DECISIONS)
        _check("wake transport", transport, WAKE_TRANSPORTS)
        key: WakeKey = (kind, decision, transport)
        with self._lock:
            self._wakes[key] = self._wakes.get(key, 0) + 1

    def snapshot(self) -> ClaimMetricsSnapshot:
        """A consistent copy of every counter (later records do not change it)."""
        with self._lock:
            return ClaimMetricsSnapshot(
                attempts=dict(self._attempts),
                active_claims=self._active_claims,
                renewal_failures=self._renewal_failures,
                wakes=dict(self._wakes),
                abandoned_activity_threads=self._abandoned_activity_threads,
                workflow_cache_hits=self._workflow_cache_hits,
                workflow_cache_misses=self._workflow_cache_misses,
                business=self.business.snapshot(),
            )

    def reset(self) -> None:
        """Zero every counter and the active-claims gauge."""
        with self._lock:
            self._attempts = _zero_attempts()
            self._active_claims = 0
            self._renewal_failures = 0
            self._wakes = {}
            self._abandoned_activity_threads = 0
            self._workflow_cache_hits = 0
            self._workflow_cache_misses = 0
        self.business.reset()

    def to_json(self) -> dict[str, Any]:
        """``self.snapshot().to_json()``: what an engine stores at each heartbeat."""
        return self.snapshot().to_json()

    @classmethod
    def from_json(cls, data: object) -> ClaimMetrics:
        """A recorder preloaded from ``to_json()`` output (fail-closed, never raises)."""
        snap = ClaimMetricsSnapshot.from_json(data)
        metrics = cls()
        metrics._attempts = dict(snap.attempts)
        metrics._active_claims = snap.active_claims
        metrics._renewal_failures = snap.renewal_failures
        metrics._wakes = dict(snap.wakes)
        metrics._abandoned_activity_threads = snap.abandoned_activity_threads
        metrics._workflow_cache_hits = snap.workflow_cache_hits
        metrics._workflow_cache_misses = snap.workflow_cache_misses
        metrics.business.load(snap.business)
        return metrics


_HELP: Final[dict[str, tuple[str, str]]] = {
    "weft_workflow_claim_attempts_total": (
        "counter",
        "Per-workflow claim attempts by outcome (deposed: taken by another engine; "
        "rotated: ended by an operator's cancel, suspend, timeout, purge or force release).",
    ),
    "weft_workflow_claims_active": ("gauge", "Workflow claims currently held."),
    "weft_workflow_claim_renewal_failures_total": (
        "counter",
        "Workflow claims found taken by another engine while renewing (not rotations).",
    ),
    "weft_wakes_total": ("counter", "Workflow wakes by kind, guard decision and transport."),
    "weft_activity_abandoned_threads_total": (
        "counter",
        "Sync activity threads abandoned while still running (they cannot be stopped).",
    ),
    "weft_workflow_cache_hits_total": (
        "counter",
        "Turns that resumed their run's cached replay (no journal replay).",
    ),
    "weft_workflow_cache_misses_total": (
        "counter",
        "Turns that found no valid cached replay and replayed the journal (cache on).",
    ),
}


def to_prometheus_text(snapshot: ClaimMetricsSnapshot) -> str:
    """Render ``snapshot`` in the Prometheus text exposition format.

    Every outcome gets a line (zeros included) so scrapers see a stable
    schema; wake lines appear for recorded triples only, in closed-set order.
    Label values are taken from the closed tuples, never from the snapshot's
    keys, so a foreign key in a hand-built snapshot cannot leak out as a label.
    """
    lines: list[str] = []

    def header(name: str) -> None:
        metric_type, help_text = _HELP[name]
        lines.append(f"# HELP {name} {help_text}")
        lines.append(f"# TYPE {name} {metric_type}")

    header("weft_workflow_claim_attempts_total")
    for outcome in CLAIM_ATTEMPT_OUTCOMES:
        n = _count_or_zero(snapshot.attempts.get(outcome, 0))
        lines.append(f'weft_workflow_claim_attempts_total{{outcome="{outcome}"}} {n}')
    header("weft_workflow_claims_active")
    lines.append(f"weft_workflow_claims_active {_count_or_zero(snapshot.active_claims)}")
    header("weft_workflow_claim_renewal_failures_total")
    failures = _count_or_zero(snapshot.renewal_failures)
    lines.append(f"weft_workflow_claim_renewal_failures_total {failures}")
    header("weft_wakes_total")
    for (kind, decision, transport), n in _closed_wakes(snapshot):
        lines.append(
            f'weft_wakes_total{{kind="{kind}",decision="{decision}",transport="{transport}"}} {n}'
        )
    header("weft_activity_abandoned_threads_total")
    abandoned = _count_or_zero(snapshot.abandoned_activity_threads)
    lines.append(f"weft_activity_abandoned_threads_total {abandoned}")
    header("weft_workflow_cache_hits_total")
    lines.append(f"weft_workflow_cache_hits_total {_count_or_zero(snapshot.workflow_cache_hits)}")
    header("weft_workflow_cache_misses_total")
    misses = _count_or_zero(snapshot.workflow_cache_misses)
    lines.append(f"weft_workflow_cache_misses_total {misses}")
    lines.extend(exposition_lines(snapshot.business))
    return "\n".join(lines) + "\n"
