"""The admission order of a ``fair`` queue: round robin across fairness keys.

Invariant: among waiting runs of equal priority (higher priority still
first), the next admitted is the oldest waiting run of the fairness key
whose turn came longest ago, where a key of weight w has its turn at its
w-th most recent admission -- so a weight-1 key is admitted once per round,
a weight-w key w times, and a key that floods the queue cannot starve one
with a single waiting run. A key whose ``concurrency_key`` is at
``per_key_concurrency`` is passed over, never waited for.

The evidence of "admitted when" is the queue's own slot rows (their
``fairness_key`` and ``admitted_at``, written by the fenced admission batch
and read under the queue lock like every count); a key whose rows were swept
(``ownership.slots.forget_old``) was admitted long ago and so comes first.
The waiting groups and that history are ONE statement (``db.fair``).
This module only orders: the admission (``engine.maintenance.admission``)
locks, re-checks every limit and commits as for a FIFO queue.
"""

from __future__ import annotations

import heapq
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from django.db.models import F, Q, Window
from django.db.models.functions import RowNumber

from weft_django.db.fair import fair_rows
from weft_django.engine.queues.flow import key_has_room
from weft_django.kernel.queue_spec import QueueSpec


@dataclass
class _Key:
    """One fairness key's waiting runs at one priority, by concurrency key."""

    weight: int = 1
    #: ``[concurrency_key, waiting, oldest created_at]``, oldest first.
    groups: list[list[Any]] = field(default_factory=list)


def _turn(history: list[int], weight: int) -> int:
    """The instant of a key's turn: its ``weight``-th most recent admission, else -1."""
    return history[weight - 1] if len(history) >= weight else -1


def fair_ids(
    spec: QueueSpec,
    candidates: Any,
    db: str,
    now_ms: int,
    want: int,
    per_key: dict[str, int],
    key_recent: dict[str, int] | None = None,
) -> list[str]:
    """Up to ``want`` workflow ids of ``candidates`` (pending runs of ``spec``
    due at ``now_ms``), in the fair admission order (see the module doc)."""
    read = fair_rows(db, spec.name, now_ms, want)
    levels: dict[int, dict[Any, _Key]] = defaultdict(dict)
    weights: dict[Any, int] = {}
    for (priority, fkey, ckey), (n, oldest, weight) in read.groups.items():
        key = levels[priority].setdefault(fkey, _Key())
        key.weight = max(key.weight, weight or 1)
        weights[fkey] = max(weights.get(fkey, 1), key.weight)
        key.groups.append([ckey, n, oldest])
    if not levels:
        return []
    history: dict[Any, list[int]] = defaultdict(list, read.history)
    turns = {k: _turn(history[k], w) for k, w in weights.items()}
    used = dict(per_key)
    rated = dict(key_recent or {})
    picks: list[tuple[int, Any, Any]] = []
    tick = 0
    for priority in sorted(levels, reverse=True):
        heap = []
        for n, (fkey, key) in enumerate(levels[priority].items()):
            key.groups.sort(key=lambda g: g[2])
            heap.append((turns[fkey], key.groups[0][2], n, fkey))
        heapq.heapify(heap)
        while heap and len(picks) < want:
            _, _, n, fkey = heapq.heappop(heap)
            key = levels[priority][fkey]
            group = next(
                (
                    g
                    for g in key.groups
                    if g[1] > 0 and (g[0] is None or key_has_room(spec, used, rated, g[0]))
                ),
                None,
            )
            if group is None:
                continue  # every concurrency key of it is full: passed over
            group[1] -= 1
            if group[0] is not None:
                used[group[0]] = used.get(group[0], 0) + 1
                rated[group[0]] = rated.get(group[0], 0) + 1
            picks.append((priority, fkey, group[0]))
            tick += 1
            history[fkey].insert(0, 2**62 + tick)  # admitted now, after every recorded one
            turns[fkey] = _turn(history[fkey], weights[fkey])
            if any(g[1] > 0 for g in key.groups):
                heapq.heappush(heap, (turns[fkey], group[2], n, fkey))
        if len(picks) >= want:
            break
    wanted: dict[tuple[int, Any, Any], int] = defaultdict(int)
    for pick in picks:
        wanted[pick] += 1
    if not wanted:
        return []
    ids = read.ids
    short = {g: n for g, n in wanted.items() if n > len(ids.get(g, ()))}
    if short:  # a group given more picks than the read's depth: its oldest, again
        ids = {**ids, **_oldest_of_groups(candidates, short)}
    out = []
    for pick in picks:
        if ids.get(pick):
            out.append(ids[pick].pop(0))
    return out


def _oldest_of_groups(
    candidates: Any, wanted: dict[tuple[int, Any, Any], int]
) -> dict[tuple[int, Any, Any], list[str]]:
    """``(priority, fairness key, concurrency key)`` → the ids of its oldest
    ``wanted`` waiting runs, oldest first: ONE statement for every group."""
    match = Q()
    for priority, fkey, ckey in wanted:
        match |= Q(priority=priority, fairness_key=fkey, concurrency_key=ckey)
    rank = Window(
        RowNumber(),
        partition_by=[F("priority"), F("fairness_key"), F("concurrency_key")],
        order_by=[F("created_at").asc(), F("workflow_id").asc()],
    )
    rows = (
        candidates.filter(match)
        .order_by()
        .annotate(rank=rank)
        .filter(rank__lte=max(wanted.values()))
        .values_list("priority", "fairness_key", "concurrency_key", "workflow_id", "rank")
    )
    ids: dict[tuple[int, Any, Any], list[str]] = {group: [] for group in wanted}
    for priority, fkey, ckey, workflow_id, n in sorted(rows, key=lambda row: row[4]):
        group = (priority, fkey, ckey)
        if n <= wanted[group]:
            ids[group].append(workflow_id)
    return ids


__all__ = ["fair_ids"]
