"""``client.fork`` and ``client.reset``: re-run a run from a journal position.

Invariants: every argument is checked before anything is written (the
engine's ``operations.fork``: the position within the journal, no group
split, the workflow registered, today's code replaying the prefix); the new
run is written by the one start write, with the journal prefix -- and for a
reset the ending of the live run -- in its one batch.
"""

from __future__ import annotations

from typing import Any

from weft_django.client.aio import asyncify
from weft_django.client.handle import WorkflowHandle
from weft_django.engine.operations import fork as forking


def fork(
    workflow_id: str,
    *,
    at_position: int,
    workflow_id_for_fork: str | None = None,
    input: Any = None,
    actor: str = "client",
) -> WorkflowHandle:
    """Start a new run whose journal is the latest run of ``workflow_id``'s
    entries before ``at_position`` (reused, not run again); it continues with
    today's code. ``workflow_id_for_fork`` defaults to ``<id>-fork-<hex>``;
    ``input`` (``None``: the source's). The source is untouched.

    ``actor``: who asked. A fork rotates no claim, so nothing here records it:
    the surfaces that act for a person record it with their user
    (``client.audit.log_repair``: the admin, the API, ``weft fork --user``)."""
    del actor
    run = forking.fork(
        workflow_id,
        at_position=at_position,
        workflow_id_for_fork=workflow_id_for_fork,
        input=input,
    )
    return WorkflowHandle(run.workflow_id, str(run.pk))


afork = asyncify(fork)


def reset(
    workflow_id: str, *, at_position: int, reason: str = "", actor: str = "client"
) -> WorkflowHandle:
    """End the latest run of ``workflow_id`` ``terminated`` (claim rotated,
    children cancelled, ``reason`` recorded) and continue the same workflow id
    from its journal before ``at_position``; the new run's handle."""
    run = forking.reset(workflow_id, at_position=at_position, reason=reason, actor=actor)
    return WorkflowHandle(run.workflow_id, str(run.pk))


areset = asyncify(reset)

__all__ = ["afork", "areset", "fork", "reset"]
