"""This test process as a Celery node's pool process.

Why: the ``weft.pickup`` task body reads the node's identity (minted before
the fork in a real node) and builds its engine lazily in the process; a test
that calls it directly needs both, and must leave neither behind for the
next test.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

from weft_django.transports.celery import identity as node_identity
from weft_django.transports.celery.pool import state


@contextmanager
def as_pool_process(
    engine_id: str,
    node_name: str,
    *,
    concurrency: int = 1,
    served_queues: frozenset[str] | None = None,
) -> Iterator[None]:
    """Mint a ``solo`` node identity for this process (serving ``served_queues``);
    on exit, dispose of the pool engine the task built and restore the identity before."""
    before = node_identity.minted.current
    node_identity.minted.current = node_identity.NodeIdentity(
        engine_id,
        node_name,
        "solo",
        os.getpid(),
        concurrency=concurrency,
        served_queues=served_queues,
    )
    try:
        yield
    finally:
        engine = getattr(state.local, "engine", None)
        if engine is not None:
            engine.dispose(grace=0)
            state.local.engine = None
        node_identity.minted.current = before
