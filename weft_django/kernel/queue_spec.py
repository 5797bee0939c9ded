"""``WEFT["QUEUES"]``: the flow-control limits, parsed and validated.

A queue is a small nested dict with its own grammar (``"100/m"``), and a malformed one is
refused with the value named before anything is admitted under it -- a rate misread as
"no limit" would let a burst through. ``conf`` validates the key through this module.
Pure: no database, no Django import beyond the settings types ``conf`` hands in.

A queue:

``concurrency`` (int >= 1, default: no limit)
    at most N runs of the queue hold a slot at once, across all engines.
``per_key_concurrency`` (int >= 1, default: no limit)
    at most M slots per ``concurrency_key``.
``rate`` (``"R/s"``, ``"R/m"``, ``"R/h"``, ``"R/d"`` or ``"R/<seconds>s"``)
    at most R admissions per sliding period, across all engines.
``per_key_rate`` (a rate, as ``rate``)
    at most R admissions per sliding period per ``concurrency_key``, across
    all engines (a run without a key is not limited by it).
``fair`` (bool, default ``False``)
    among runs of equal priority, admit the oldest waiting run of the
    fairness key admitted least recently (round robin across keys, a key of
    weight w taking w admissions per round) instead of first in, first out.
``parked_holds_slot`` (bool, default ``True``)
    a ``parked`` run (waiting on a timer, a signal, a child) keeps its slot;
    ``False``: only ``running`` runs count.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

QUEUE_OPTIONS = (
    "concurrency",
    "per_key_concurrency",
    "rate",
    "per_key_rate",
    "fair",
    "parked_holds_slot",
)

_PERIODS_S = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_RATE = re.compile(r"^\s*(\d+)\s*/\s*(?:(\d+)\s*)?([smhd])\s*$")
_NAME = re.compile(r"^[A-Za-z0-9_.:-]{1,100}$")


@dataclass(frozen=True)
class QueueSpec:
    """One validated queue; ``None`` limits are no limit."""

    name: str
    concurrency: int | None = None
    per_key_concurrency: int | None = None
    #: ``(count, period_ms)``
    rate: tuple[int, int] | None = None
    parked_holds_slot: bool = True
    #: ``(count, period_ms)`` per concurrency key
    per_key_rate: tuple[int, int] | None = None
    fair: bool = False

    @property
    def rate_text(self) -> str | None:
        if self.rate is None:
            return None
        return f"{self.rate[0]}/{self.rate[1] // 1000}s"

    @property
    def per_key_rate_text(self) -> str | None:
        if self.per_key_rate is None:
            return None
        return f"{self.per_key_rate[0]}/{self.per_key_rate[1] // 1000}s"


def parse_rate(value: object, *, where: str = "rate") -> tuple[int, int]:
    """``"100/m"`` → ``(100, 60000)``; ``ValueError`` naming the value otherwise."""
    match = _RATE.match(value) if isinstance(value, str) else None
    if match is None or int(match.group(1)) < 1 or (match.group(2) and int(match.group(2)) < 1):
        raise ValueError(
            f"{where} must look like '100/m' (a count >= 1 per s, m, h or d, "
            f"or per '<n>s'), got {value!r}"
        )
    count = int(match.group(1))
    multiple = int(match.group(2) or 1)
    return count, multiple * _PERIODS_S[match.group(3)] * 1000


def _limit(name: str, raw: dict[str, Any], key: str, problems: list[str]) -> int | None:
    value = raw.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        problems.append(f"WEFT['QUEUES'][{name!r}][{key!r}] must be an integer >= 1, got {value!r}")
        return None
    return value


def parse_queues(value: object) -> tuple[dict[str, QueueSpec], list[str]]:
    """Every queue of ``WEFT["QUEUES"]`` and the message of every problem."""
    problems: list[str] = []
    if value is None:
        return {}, problems
    if not isinstance(value, dict):
        return {}, [f"WEFT['QUEUES'] must be a dict of queue name -> options, got {value!r}"]
    specs: dict[str, QueueSpec] = {}
    for name, raw in value.items():
        if not isinstance(name, str) or not _NAME.match(name):
            problems.append(
                f"WEFT['QUEUES'] key {name!r} is not a queue name "
                "(1 to 100 letters, digits, '_', '.', ':' or '-')"
            )
            continue
        if not isinstance(raw, dict):
            problems.append(f"WEFT['QUEUES'][{name!r}] must be a dict of options, got {raw!r}")
            continue
        unknown = sorted(set(raw) - set(QUEUE_OPTIONS), key=str)
        if unknown:
            problems.append(
                f"WEFT['QUEUES'][{name!r}] has unknown options {unknown!r}; "
                f"known: {', '.join(QUEUE_OPTIONS)}"
            )
        rate = None
        if raw.get("rate") is not None:
            try:
                rate = parse_rate(raw["rate"], where=f"WEFT['QUEUES'][{name!r}]['rate']")
            except ValueError as exc:
                problems.append(str(exc))
        per_key_rate = None
        if raw.get("per_key_rate") is not None:
            try:
                per_key_rate = parse_rate(
                    raw["per_key_rate"], where=f"WEFT['QUEUES'][{name!r}]['per_key_rate']"
                )
            except ValueError as exc:
                problems.append(str(exc))
        fair = raw.get("fair", False)
        if not isinstance(fair, bool):
            problems.append(f"WEFT['QUEUES'][{name!r}]['fair'] must be True or False, got {fair!r}")
            fair = False
        parked = raw.get("parked_holds_slot", True)
        if not isinstance(parked, bool):
            problems.append(
                f"WEFT['QUEUES'][{name!r}]['parked_holds_slot'] must be True or False, "
                f"got {parked!r}"
            )
            parked = True
        specs[name] = QueueSpec(
            name=name,
            concurrency=_limit(name, raw, "concurrency", problems),
            per_key_concurrency=_limit(name, raw, "per_key_concurrency", problems),
            rate=rate,
            parked_holds_slot=parked,
            per_key_rate=per_key_rate,
            fair=fair,
        )
    return specs, problems


__all__ = ["QUEUE_OPTIONS", "QueueSpec", "parse_queues", "parse_rate"]
