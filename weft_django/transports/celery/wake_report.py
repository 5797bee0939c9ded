"""What a weft task reports: which workflow, what happened -- and how loudly.

Why: Flower and Celery's own logs show a task's arguments and its result.
A ``weft.drive`` that only carried a run UUID and "succeeded" with
``"duplicate"`` told an operator nothing (which workflow? was anything
wrong?). So every weft task returns ``{"outcome", "workflow_id",
"run_id"}`` (``TaskOutcome.as_result``), and the messages carry the
workflow id among their keyword arguments.

And a node that boots under the name of a previous boot (a restart, a
crash) consumes the same direct queue, where the previous boot's wakes may
still wait -- hundreds after a busy node died. Each is stale by
construction (it names the previous boot's engine id, which nothing holds
any more) and discarding it is always safe (polling re-sends what is
due). They are counted (``weft_wakes_total{decision="discard"}``), logged
one by one at DEBUG only, and summarised in ONE INFO line per node and
previous boot (``Leftovers``), whichever pool process meets the first.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import shutil
import tempfile
import threading
from typing import Any

from weft_django.transports.celery.identity import NodeIdentity

logger = logging.getLogger("weft_django.transports.celery")


class TaskOutcome(str):
    """A task body's outcome (``"driven"``, ``"duplicate"``, ...) and its workflow."""

    workflow_id: str

    def __new__(cls, outcome: str, workflow_id: str | None = "") -> TaskOutcome:
        made = super().__new__(cls, outcome)
        made.workflow_id = str(workflow_id or "")
        return made

    def as_result(self, run_id: Any) -> dict[str, str]:
        """The task's return value (what Flower shows as its result)."""
        return {"outcome": str(self), "workflow_id": self.workflow_id, "run_id": str(run_id)}


def outcome_of(value: Any, workflow_id: str | None = "") -> TaskOutcome:
    """``value`` as a ``TaskOutcome`` (keeping its workflow id if it has one)."""
    if isinstance(value, TaskOutcome):
        if not value.workflow_id and workflow_id:
            return TaskOutcome(str(value), workflow_id)
        return value
    return TaskOutcome(str(value), workflow_id)


def is_previous_boot(engine_id: str, ident: NodeIdentity) -> bool:
    """``engine_id`` is another boot of this very node (same name, another id)."""
    return engine_id != ident.engine_id and engine_id.startswith(f"{ident.node_name[:160]}:")


def _digest(value: str) -> str:
    return hashlib.sha1(value.encode(), usedforsecurity=False).hexdigest()[:16]


class Leftovers:
    """One INFO line per node and previous boot, across the node's pool processes.

    The pool processes of a prefork node share no memory; they do share the
    host, so the first to meet a previous boot's wake creates a marker file
    (``O_EXCL``) in a directory of this boot, and only it logs. The main
    process removes the directory at shutdown (``forget``).
    """

    def __init__(self) -> None:
        self._seen: set[tuple[str, str]] = set()
        self._lock = threading.Lock()

    @staticmethod
    def directory(ident: NodeIdentity) -> str:
        return os.path.join(tempfile.gettempdir(), f"weft-node-{_digest(ident.engine_id)}")

    def first_for_node(self, ident: NodeIdentity, previous: str) -> bool:
        """Is this the node's first wake of ``previous`` (the one to log)?"""
        key = (ident.engine_id, previous)
        with self._lock:
            if key in self._seen:
                return False
            self._seen.add(key)
        folder = self.directory(ident)
        try:
            os.makedirs(folder, exist_ok=True)
            fd = os.open(os.path.join(folder, _digest(previous)), os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            return False
        except OSError:
            return True  # no shared marker: this process's first says it
        os.close(fd)
        return True

    def note(self, ident: NodeIdentity, previous: str, run_id: Any, workflow_id: str) -> None:
        """A previous boot's wake was discarded: DEBUG, and the node's one INFO line."""
        logger.debug(
            "weft wake leftover run=%s workflow=%s engine=%s", run_id, workflow_id or "-", previous
        )
        if self.first_for_node(ident, previous):
            logger.info(
                "weft node %s: discarding the wakes a previous boot of this node (engine %s) "
                "left in its direct queue; they are stale by construction (polling re-sends "
                'what is due), counted in weft_wakes_total{decision="discard"} and not '
                "logged one by one",
                ident.node_name,
                previous,
            )

    def forget(self, ident: NodeIdentity) -> None:
        with contextlib.suppress(OSError):
            shutil.rmtree(self.directory(ident))


leftovers = Leftovers()


__all__ = [
    "Leftovers",
    "TaskOutcome",
    "is_previous_boot",
    "leftovers",
    "outcome_of",
]
