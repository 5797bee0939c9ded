"""Bounded-cardinality claim and wake counters for one engine (SPEC §4.8).

``ClaimMetrics`` is the recorder an engine owns: claim churn (acquisitions,
takeovers, lost races, depositions, rotations, cooldown skips), the claims it
holds, renewal failures, how wakes are decided, sync activity threads abandoned
still running, workflow-cache hits and misses, and per-type business counters
(``weft_django.metrics.business``). The invariant protected here: **every label
value is a member of a closed set**. No API accepts a free-form label; each
``record_*`` method validates its arguments against a closed tuple and raises
``ValueError`` otherwise. Counters are pure Python (no ``prometheus_client``).

This is the public path of every claim-metrics name (SPEC §7): the closed label
sets and the snapshot are defined in ``metrics_snapshot`` and importable from
here; the Prometheus text exposition is at the end of this module.
"""

from __future__ import annotations

import threading
from typing import Any, Final

from weft_django.kernel.vocab import (
    WAKE_KINDS,
    WAKE_TRANSPORTS,
    ClaimAttemptOutcome,
    WakeKind,
    WakeTransport,
)
from weft_django.metrics.business import BusinessMetrics, exposition_lines
from weft_django.ownership.metrics_snapshot import (
    CLAIM_ATTEMPT_OUTCOMES,
    CLOSED_LABEL_SETS,
    RUN_STATUS_LABELS,
    WAKE_DECISIONS,
    ClaimMetricsSnapshot,
    WakeDecision,
    WakeKey,
    closed_wakes,
    count_or_zero,
    is_count,
    label_value_is_closed,
    zero_attempts,
)

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


def _check(name: str, value: object, allowed: tuple[str, ...]) -> None:
    if not (isinstance(value, str) and value in allowed):
        raise ValueError(f"{name} must be one of {', '.join(allowed)}; got {value!r:.80}")


def _check_count(name: str, value: object) -> int:
    if not is_count(value):
        raise ValueError(f"{name} must be a non-negative int, got {value!r:.80}")
    return int(value)


class ClaimMetrics:
    """Thread-safe in-memory counters, one instance per engine process.

    Every mutator validates its labels against the closed sets and raises
    ``ValueError`` (naming the bad value and the allowed ones) otherwise.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._attempts = zero_attempts()
        self._active_claims = 0
        self._renewal_failures = 0
        self._wakes: dict[WakeKey, int] = {}
        self._abandoned_activity_threads = 0
        self._workflow_cache_hits = 0
        self._workflow_cache_misses = 0
        self._workflow_crash_loops = 0
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

    def record_crash_loop(self) -> None:
        """Count one run suspended with ``CrashLoopError`` (``engine.turn.failures``)."""
        with self._lock:
            self._workflow_crash_loops += 1

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
                workflow_crash_loops=self._workflow_crash_loops,
                business=self.business.snapshot(),
            )

    def reset(self) -> None:
        """Zero every counter and the active-claims gauge."""
        with self._lock:
            self._attempts = zero_attempts()
            self._active_claims = 0
            self._renewal_failures = 0
            self._wakes = {}
            self._abandoned_activity_threads = 0
            self._workflow_cache_hits = 0
            self._workflow_cache_misses = 0
            self._workflow_crash_loops = 0
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
        metrics._workflow_crash_loops = snap.workflow_crash_loops
        metrics.business.load(snap.business)
        return metrics


# -- the Prometheus text exposition -----------------------------------------------
# Label values come from the closed tuples, never from a snapshot's keys, so a
# foreign key in a hand-built snapshot cannot leak out as a label; every
# claim-attempt outcome gets a line, zeros included (a stable schema).

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
    "weft_workflow_crash_loops_total": (
        "counter",
        "Runs suspended with CrashLoopError: their turns kept dying with their engine.",
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
        n = count_or_zero(snapshot.attempts.get(outcome, 0))
        lines.append(f'weft_workflow_claim_attempts_total{{outcome="{outcome}"}} {n}')
    header("weft_workflow_claims_active")
    lines.append(f"weft_workflow_claims_active {count_or_zero(snapshot.active_claims)}")
    header("weft_workflow_claim_renewal_failures_total")
    failures = count_or_zero(snapshot.renewal_failures)
    lines.append(f"weft_workflow_claim_renewal_failures_total {failures}")
    header("weft_wakes_total")
    for (kind, decision, transport), n in closed_wakes(snapshot):
        lines.append(
            f'weft_wakes_total{{kind="{kind}",decision="{decision}",transport="{transport}"}} {n}'
        )
    header("weft_activity_abandoned_threads_total")
    abandoned = count_or_zero(snapshot.abandoned_activity_threads)
    lines.append(f"weft_activity_abandoned_threads_total {abandoned}")
    header("weft_workflow_cache_hits_total")
    lines.append(f"weft_workflow_cache_hits_total {count_or_zero(snapshot.workflow_cache_hits)}")
    header("weft_workflow_cache_misses_total")
    misses = count_or_zero(snapshot.workflow_cache_misses)
    lines.append(f"weft_workflow_cache_misses_total {misses}")
    header("weft_workflow_crash_loops_total")
    loops = count_or_zero(snapshot.workflow_crash_loops)
    lines.append(f"weft_workflow_crash_loops_total {loops}")
    lines.extend(exposition_lines(snapshot.business))
    return "\n".join(lines) + "\n"
