"""Per-type business metrics: run ends and activity attempts.

These four families are labelled by *type names* (a workflow's or an activity's registered
name), which are code, not traffic, but are not a closed tuple known here. The invariant
protected: **the label values stay bounded**. The engine passes a name only if it is
registered in its process (else ``OTHER``); a name must look like one
(``valid_type_name``), and a snapshot read back from the database keeps at
most ``MAX_TYPE_NAMES`` names per family, folding the rest into ``OTHER``.
Statuses and outcomes are closed tuples. Run and attempt ids never appear.

Histograms use one fixed bucket list (``DURATION_BUCKETS``) so snapshots of
different engines add bucket by bucket; counts are stored per bucket (not
cumulative) and made cumulative only in the exposition.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

__all__ = [
    "ACTIVITY_ATTEMPT_OUTCOMES",
    "DURATION_BUCKETS",
    "FAMILIES",
    "MAX_TYPE_NAMES",
    "OTHER",
    "WORKFLOW_END_STATUSES",
    "BusinessMetrics",
    "BusinessSnapshot",
    "Histogram",
    "escape_label",
    "exposition_lines",
    "valid_type_name",
]

#: Upper bounds (seconds) of the duration buckets; ``+Inf`` is implied. Up to 30
#: days: a workflow that waits a month lands in a bucket, not only in ``+Inf``.
# fmt: off
DURATION_BUCKETS: Final[tuple[float, ...]] = (
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
    300.0, 900.0, 3600.0, 21600.0, 86400.0, 259200.0, 604800.0, 2592000.0,
)
# fmt: on
#: How a run ends for good (``weft_workflows_finished_total{status}``).
WORKFLOW_END_STATUSES: Final[tuple[str, ...]] = (
    "completed",
    "failed",
    "cancelled",
    "timed_out",
    "terminated",
)
#: How one activity attempt ends (``weft_activity_attempts_total{outcome}``).
ACTIVITY_ATTEMPT_OUTCOMES: Final[tuple[str, ...]] = ("completed", "failed", "timed_out")
#: The label of a type name this process did not register (or one past the cap).
OTHER: Final = "other"
#: Type names kept per family when reading a stored snapshot; the rest count as OTHER.
MAX_TYPE_NAMES: Final = 500


def valid_type_name(value: object) -> bool:
    """A registered name's shape: a non-empty printable string of at most 200 characters."""
    return isinstance(value, str) and 0 < len(value) <= 200 and value.isprintable()


def _count(v: object) -> int | None:
    return int(v) if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else None


@dataclass(frozen=True)
class Histogram:
    """Per-bucket counts (``len(DURATION_BUCKETS) + 1``, the last is +Inf), sum, count."""

    buckets: tuple[int, ...] = (0,) * (len(DURATION_BUCKETS) + 1)
    total: float = 0.0

    @property
    def count(self) -> int:
        return sum(self.buckets)

    def observed(self, seconds: float) -> Histogram:
        index = next((i for i, b in enumerate(DURATION_BUCKETS) if seconds <= b), -1)
        buckets = list(self.buckets)
        buckets[index] += 1
        return Histogram(tuple(buckets), self.total + seconds)

    def __add__(self, other: Histogram) -> Histogram:
        return Histogram(
            tuple(a + b for a, b in zip(self.buckets, other.buckets, strict=True)),
            self.total + other.total,
        )

    def __sub__(self, other: Histogram) -> Histogram:
        return Histogram(
            tuple(a - b for a, b in zip(self.buckets, other.buckets, strict=True)),
            self.total - other.total,
        )

    def cumulative(self) -> Iterator[tuple[str, int]]:
        """``(le, cumulative count)`` pairs as the exposition writes them."""
        running = 0
        for bound, n in zip((*DURATION_BUCKETS, math.inf), self.buckets, strict=True):
            running += n
            yield ("+Inf" if math.isinf(bound) else repr(bound)), running

    def to_json(self) -> dict[str, Any]:
        return {"buckets": list(self.buckets), "sum": self.total}

    @classmethod
    def from_json(cls, data: object) -> Histogram | None:
        if not isinstance(data, Mapping):
            return None
        raw, total = data.get("buckets"), data.get("sum")
        if not isinstance(raw, list) or len(raw) != len(DURATION_BUCKETS) + 1:
            return None
        counts = [_count(n) for n in raw]
        if any(n is None for n in counts) or isinstance(total, bool):
            return None
        if not isinstance(total, int | float) or not math.isfinite(total) or total < 0:
            return None
        return cls(tuple(n for n in counts if n is not None), float(total))


Pair = tuple[str, str]


def _add_counts(a: Mapping[Pair, int], b: Mapping[Pair, int], sign: int = 1) -> dict[Pair, int]:
    out = dict(a)
    for key, n in b.items():
        out[key] = out.get(key, 0) + sign * n
    return {k: n for k, n in out.items() if n != 0}


def _add_hists(
    a: Mapping[str, Histogram], b: Mapping[str, Histogram], sign: int = 1
) -> dict[str, Histogram]:
    out = dict(a)
    for key, h in b.items():
        base = out.get(key, Histogram())
        out[key] = base + h if sign > 0 else base - h
    return {k: h for k, h in out.items() if h.count != 0}


@dataclass(frozen=True)
class BusinessSnapshot:
    """Run ends and activity attempts by type name, at one instant."""

    workflow_durations: dict[str, Histogram] = field(default_factory=dict)
    workflows_finished: dict[Pair, int] = field(default_factory=dict)
    activity_durations: dict[str, Histogram] = field(default_factory=dict)
    activity_attempts: dict[Pair, int] = field(default_factory=dict)

    def __add__(self, other: BusinessSnapshot) -> BusinessSnapshot:
        return BusinessSnapshot(
            _add_hists(self.workflow_durations, other.workflow_durations),
            _add_counts(self.workflows_finished, other.workflows_finished),
            _add_hists(self.activity_durations, other.activity_durations),
            _add_counts(self.activity_attempts, other.activity_attempts),
        )

    def __sub__(self, other: BusinessSnapshot) -> BusinessSnapshot:
        return BusinessSnapshot(
            _add_hists(self.workflow_durations, other.workflow_durations, -1),
            _add_counts(self.workflows_finished, other.workflows_finished, -1),
            _add_hists(self.activity_durations, other.activity_durations, -1),
            _add_counts(self.activity_attempts, other.activity_attempts, -1),
        )

    def is_zero(self) -> bool:
        return not (
            self.workflow_durations
            or self.workflows_finished
            or self.activity_durations
            or self.activity_attempts
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "workflow_durations": {
                k: h.to_json() for k, h in sorted(self.workflow_durations.items())
            },
            "workflows_finished": [
                {"workflow": w, "status": s, "count": n}
                for (w, s), n in sorted(self.workflows_finished.items())
            ],
            "activity_durations": {
                k: h.to_json() for k, h in sorted(self.activity_durations.items())
            },
            "activity_attempts": [
                {"activity": a, "outcome": o, "count": n}
                for (a, o), n in sorted(self.activity_attempts.items())
            ],
        }

    @classmethod
    def from_json(cls, data: object) -> BusinessSnapshot:
        """Fail-closed: bad entries are skipped; past ``MAX_TYPE_NAMES`` names, ``OTHER``."""
        if not isinstance(data, Mapping):
            return cls()
        return cls(
            _hists_from_json(data.get("workflow_durations")),
            _pairs_from_json(
                data.get("workflows_finished"), "workflow", "status", WORKFLOW_END_STATUSES
            ),
            _hists_from_json(data.get("activity_durations")),
            _pairs_from_json(
                data.get("activity_attempts"), "activity", "outcome", ACTIVITY_ATTEMPT_OUTCOMES
            ),
        )


def _bounded(name: str, seen: set[str]) -> str:
    if name in seen or len(seen) < MAX_TYPE_NAMES:
        seen.add(name)
        return name
    return OTHER


def _hists_from_json(raw: object) -> dict[str, Histogram]:
    out: dict[str, Histogram] = {}
    if not isinstance(raw, Mapping):
        return out
    seen: set[str] = set()
    for name, value in raw.items():
        hist = Histogram.from_json(value)
        if valid_type_name(name) and hist is not None:
            key = _bounded(name, seen)
            out[key] = out.get(key, Histogram()) + hist
    return out


def _pairs_from_json(
    raw: object, name_key: str, label_key: str, allowed: tuple[str, ...]
) -> dict[Pair, int]:
    out: dict[Pair, int] = {}
    if not isinstance(raw, list):
        return out
    seen: set[str] = set()
    for item in raw:
        if not isinstance(item, Mapping):
            continue
        name, label, n = item.get(name_key), item.get(label_key), _count(item.get("count"))
        if valid_type_name(name) and label in allowed and n is not None:
            key = (_bounded(str(name), seen), str(label))
            out[key] = out.get(key, 0) + n
    return out


class BusinessMetrics:
    """Thread-safe recorder of one engine's run ends and activity attempts."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._snapshot = BusinessSnapshot()

    @staticmethod
    def _check(name: object, label: object, allowed: tuple[str, ...], seconds: object) -> float:
        if not valid_type_name(name):
            raise ValueError(
                f"type name must be a printable string of 1-200 chars, got {name!r:.80}"
            )
        if label not in allowed:
            raise ValueError(f"must be one of {', '.join(allowed)}; got {label!r:.80}")
        if isinstance(seconds, bool) or not isinstance(seconds, int | float):
            raise ValueError(f"duration must be a number of seconds, got {seconds!r:.80}")
        if not math.isfinite(seconds):
            raise ValueError(f"duration must be finite, got {seconds!r:.80}")
        return max(0.0, float(seconds))  # a clock step back is not a negative duration

    def record_workflow_finished(self, workflow: str, status: str, seconds: float) -> None:
        """One run of ``workflow`` ended ``status`` after ``seconds`` (from its creation)."""
        value = self._check(workflow, status, WORKFLOW_END_STATUSES, seconds)
        with self._lock:
            s = self._snapshot
            hist = s.workflow_durations.get(workflow, Histogram()).observed(value)
            key = (workflow, status)
            self._snapshot = BusinessSnapshot(
                {**s.workflow_durations, workflow: hist},
                {**s.workflows_finished, key: s.workflows_finished.get(key, 0) + 1},
                s.activity_durations,
                s.activity_attempts,
            )

    def record_activity_attempt(self, activity: str, outcome: str, seconds: float) -> None:
        """One attempt of ``activity`` ended ``outcome`` after ``seconds``."""
        value = self._check(activity, outcome, ACTIVITY_ATTEMPT_OUTCOMES, seconds)
        with self._lock:
            s = self._snapshot
            hist = s.activity_durations.get(activity, Histogram()).observed(value)
            key = (activity, outcome)
            self._snapshot = BusinessSnapshot(
                s.workflow_durations,
                s.workflows_finished,
                {**s.activity_durations, activity: hist},
                {**s.activity_attempts, key: s.activity_attempts.get(key, 0) + 1},
            )

    def snapshot(self) -> BusinessSnapshot:
        with self._lock:
            return self._snapshot

    def load(self, snapshot: BusinessSnapshot) -> None:
        with self._lock:
            self._snapshot = snapshot

    def reset(self) -> None:
        self.load(BusinessSnapshot())


#: name -> (type, help, label of the type name): the four families' exposition.
FAMILIES: Final[dict[str, tuple[str, str, str]]] = {
    "weft_workflow_duration_seconds": (
        "histogram",
        "Seconds from a run's creation to its end, by workflow type.",
        "workflow",
    ),
    "weft_workflows_finished_total": (
        "counter",
        "Runs that ended (completed, failed, cancelled, timed_out, terminated), by workflow type.",
        "workflow",
    ),
    "weft_activity_duration_seconds": (
        "histogram",
        "Seconds from an activity attempt's submit to its outcome, by activity type.",
        "activity",
    ),
    "weft_activity_attempts_total": (
        "counter",
        "Activity attempts that ended (completed, failed, timed_out), by activity type.",
        "activity",
    ),
}


def escape_label(value: str) -> str:
    """A label value as the text exposition format writes it."""
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def exposition_lines(snapshot: BusinessSnapshot) -> list[str]:
    """The four families in the Prometheus text format (HELP and TYPE always)."""
    lines: list[str] = []
    for name, (kind, help_text, label) in FAMILIES.items():
        lines.append(f"# HELP {name} {help_text}")
        lines.append(f"# TYPE {name} {kind}")
        if kind == "histogram":
            hists = (
                snapshot.workflow_durations if label == "workflow" else snapshot.activity_durations
            )
            for type_name, hist in sorted(hists.items()):
                who = f'{label}="{escape_label(type_name)}"'
                for le, n in hist.cumulative():
                    lines.append(f'{name}_bucket{{{who},le="{le}"}} {n}')
                lines.append(f"{name}_sum{{{who}}} {hist.total!r}")
                lines.append(f"{name}_count{{{who}}} {hist.count}")
        else:
            counts, second = (
                (snapshot.workflows_finished, "status")
                if label == "workflow"
                else (snapshot.activity_attempts, "outcome")
            )
            for (type_name, value), n in sorted(counts.items()):
                lines.append(
                    f'{name}{{{label}="{escape_label(type_name)}",{second}="{value}"}} {n}'
                )
    return lines
