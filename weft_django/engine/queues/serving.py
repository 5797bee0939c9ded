"""Engines that serve chosen queues (``weft_worker --queues`` / ``--exclude-queues``).

Invariant: an engine admits runs only of the queues it serves (its
``served_queues``; ``None``: every declared queue), and says which in its
``EngineRecord.queues`` from its boot, so ``weft_status`` and the deploy check
(``inspection.queues.unserved_queues``) can name a queue whose waiting runs
no live engine will ever admit. A run an engine already holds (a takeover
carries its slot) is driven by whichever engine holds it. An undeclared name
is refused before any engine is built.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from weft_django.kernel.queue_spec import QueueSpec


def _names(value: str | Iterable[str] | None, where: str, declared: Iterable[str]) -> set[str]:
    if value is None:
        return set()
    names = value.split(",") if isinstance(value, str) else list(value)
    cleaned = {n.strip() for n in names if n.strip()}
    known = set(declared)
    for name in sorted(cleaned):
        if name not in known:
            shown = ", ".join(sorted(known)) or "none"
            raise ValueError(
                f"{where} names queue {name!r}, which WEFT['QUEUES'] does not declare "
                f"(declared: {shown})"
            )
    return cleaned


def parse_served(
    declared: Iterable[str],
    queues: str | Iterable[str] | None = None,
    exclude: str | Iterable[str] | None = None,
) -> frozenset[str] | None:
    """The queues an engine serves: ``queues`` (default: all declared) less
    ``exclude``; ``None`` when that is every declared queue and none was named."""
    declared = list(declared)
    chosen = _names(queues, "--queues", declared)
    excluded = _names(exclude, "--exclude-queues", declared)
    if queues is None and not excluded:
        return None
    base = chosen if queues is not None else set(declared)
    return frozenset(base - excluded)


def served_specs(engine: Any, queues: Mapping[str, QueueSpec]) -> dict[str, QueueSpec]:
    """The declared ``queues`` this engine admits runs of."""
    served: frozenset[str] | None = getattr(engine, "served_queues", None)
    if served is None:
        return dict(queues)
    return {name: spec for name, spec in queues.items() if name in served}


__all__ = ["parse_served", "served_specs"]
