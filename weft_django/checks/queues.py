"""System checks of flow control: ``weft.E031``, ``weft.E032``, ``weft.W036``.

Why at check time: a ``@workflow(queue="emails")`` whose queue is not in
``WEFT["QUEUES"]`` would make every start of it fail at the call; the
deploy should refuse instead, naming the workflow and the queue. Queues
rest on per-workflow claims (a slot is a claim generation's), so they are
refused in the other ownership modes. ``weft.E030`` (a malformed queue) is
``conf``'s, like every settings problem. These never touch the database;
the deploy check ``weft.W036`` (``check --deploy``) reads it: a queue with
waiting runs that no live engine serves (``weft_worker --queues``).
"""

from __future__ import annotations

from typing import Any

from django.core import checks
from django.db import DatabaseError

from weft_django.conf import evaluate_settings
from weft_django.engine.workflow.definitions import registry
from weft_django.inspection.queues import unserved_queues
from weft_django.kernel.clock import wall_ms


def check_queues(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    settings, _ = evaluate_settings()
    declared = settings.queues
    messages: list[checks.CheckMessage] = []
    known = ", ".join(sorted(declared)) or "none"
    for name, definition in sorted(registry.workflows.items()):
        if definition.queue is not None and definition.queue not in declared:
            messages.append(
                checks.Error(
                    f"workflow {name!r} names queue {definition.queue!r}, "
                    "which WEFT['QUEUES'] does not declare",
                    hint=f"Declared queues: {known}.",
                    id="weft.E031",
                )
            )
    for name, activity in sorted(registry.activities.items()):
        queue = getattr(activity, "queue", None)
        if queue is not None and queue not in declared:
            messages.append(
                checks.Error(
                    f"activity {name!r} names queue {queue!r}, "
                    "which WEFT['QUEUES'] does not declare",
                    hint=f"Declared queues: {known}.",
                    id="weft.E031",
                )
            )
    if declared and settings.ownership != "workflow-lease":
        messages.append(
            checks.Error(
                f"WEFT['QUEUES'] needs OWNERSHIP='workflow-lease', got {settings.ownership!r}: "
                "a queue slot belongs to a per-workflow claim generation",
                id="weft.E032",
            )
        )
    return messages


def check_unserved_queues(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """``weft.W036``: a declared queue whose pending runs no live engine serves."""
    try:
        unserved = unserved_queues(wall_ms())
    except DatabaseError:
        return []  # no database to read yet (a first deploy): nothing waits
    return [
        checks.Warning(
            f"queue {queue!r} has {waiting} waiting run(s) that no live engine serves",
            hint="Start a weft_worker whose --queues include it (or without --queues).",
            id="weft.W036",
        )
        for queue, waiting in sorted(unserved.items())
    ]


__all__ = ["check_queues", "check_unserved_queues"]
