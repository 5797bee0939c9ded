"""Which weft queues a Celery node serves: read from the Celery queues it consumes.

Why: ``weft_worker --queues a,b`` makes a standalone engine admit only runs of
``a`` and ``b``; a Celery node says the same with the queues it consumes. The
weft queue ``reports`` (a ``WEFT["QUEUES"]`` name) is the Celery queue
``weft.q.reports`` (``<shared queue>.q.<name>``; the shared queue is
``install(app, queue=...)``, ``weft`` by default). The pickup of a pending run
of ``reports`` goes to that Celery queue (``messages.send_pickup``), so only a
node consuming it is offered the run; the node's engine admits runs only of
the queues it serves and names them in its ``EngineRecord.queues``, which
``weft_status`` and the deploy check (``weft.W036``) read.

The rule, a pure function of the worker's ``-Q`` / ``-X`` (``served_by``):

- ``-Q`` naming ``weft.q.*`` queues: the node serves those weft queues (less
  any ``-X weft.q.*``); ``-Q weft.q.reports`` alone opts the node in;
- otherwise (no ``-Q``, ``-Q weft``, ``--weft``): every declared queue, less
  those ``-X weft.q.*`` excludes -- today's behaviour when nothing is named;
- a ``weft.q.*`` name ``WEFT["QUEUES"]`` does not declare maps to nothing: the
  node serves the rest (possibly none) and logs a warning naming it. A
  Celery worker is not refused over it (a queue removed from the settings
  during a rolling deploy must not stop the nodes that still name it).

A serving node still drives runs without a queue (as ``weft_worker
--queues`` does): they are offered on the shared queue every engine consumes.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass

#: Between the shared queue's name and a weft queue's: ``weft`` + ``.q.`` + ``reports``.
INFIX = ".q."


def prefix(shared_queue: str) -> str:
    """The prefix of every Celery queue that carries one weft queue's pickups."""
    return f"{shared_queue}{INFIX}"


def celery_queue(shared_queue: str, weft_queue: str) -> str:
    """The Celery queue of the weft queue ``weft_queue``: ``weft.q.reports``."""
    return f"{prefix(shared_queue)}{weft_queue}"


def _mapped(names: Iterable[str], shared_queue: str) -> list[str]:
    start = prefix(shared_queue)
    return [n[len(start) :] for n in names if n.startswith(start) and len(n) > len(start)]


def names_weft_queue(names: Iterable[str], shared_queue: str) -> list[str]:
    """The Celery queues among ``names`` that map to a weft queue (``weft.q.*``)."""
    start = prefix(shared_queue)
    return [n for n in names if n.startswith(start) and len(n) > len(start)]


@dataclass(frozen=True)
class Served:
    """A node's weft queues: ``queues`` (``None``: every declared queue) and
    the ``weft.q.*`` names it was given that map to no declared queue."""

    queues: frozenset[str] | None
    unknown: tuple[str, ...] = ()

    def describe(self) -> str:
        if self.queues is None:
            return "every declared queue"
        return ", ".join(sorted(self.queues)) or "no declared queue"


def served_by(
    selected: Collection[str] | None,
    excluded: Collection[str],
    *,
    declared: Collection[str],
    shared_queue: str,
) -> Served:
    """The weft queues a node with these ``-Q`` (``None``: none given) and ``-X`` serves."""
    chosen = _mapped(selected or (), shared_queue)
    left_out = _mapped(excluded, shared_queue)
    known = set(declared)
    unknown = sorted({n for n in (*chosen, *left_out) if n not in known})
    if not chosen and not left_out:
        return Served(None, tuple(celery_queue(shared_queue, n) for n in unknown))
    base = set(chosen) if chosen else set(known)
    queues = frozenset((base & known) - set(left_out))
    return Served(queues, tuple(celery_queue(shared_queue, n) for n in unknown))


def consumed_for(served: Served, *, declared: Iterable[str], shared_queue: str) -> list[str]:
    """The Celery queues a node serving ``served`` consumes: the shared one, then
    the queue of each weft queue it serves."""
    queues = served.queues
    names = sorted(declared) if queues is None else sorted(queues)
    return [shared_queue, *(celery_queue(shared_queue, n) for n in names)]


__all__ = [
    "INFIX",
    "Served",
    "celery_queue",
    "consumed_for",
    "names_weft_queue",
    "prefix",
    "served_by",
]
