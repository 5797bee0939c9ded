"""How a caller waiting in ``client.update`` hears that its answer is recorded.

Why over the ``finished`` announcement: a waiter already exists for "tell me
when this is durable" (``WorkflowHandle.result``: ``LISTEN weft_done`` on
PostgreSQL, one shared connection per process), and its key is any string.
An answer's key (``update:<run id>:<update id>``) can never be a run id, so
no result waiter is woken by it, and the backends that ignore ``finished``
(Celery, wake hooks) ignore it too. It is sent only after the checkpoint
that recorded the ``update-done`` entry committed: a waiter that hears it
finds the answer in the journal; one that misses it re-reads (polling).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from weft_django.engine.wakes import Wake, announce

DONE_EVENT = "update-done"


def answer_key(run_id: Any, update_id: str) -> str:
    """What a caller waiting for an update's answer subscribes to."""
    return f"update:{run_id}:{update_id}"


def announce_answers(run_id: Any, workflow_id: str, using: str, recorded: Iterable[Any]) -> None:
    """After a committed checkpoint: wake whoever waits for the answers in it
    (``recorded``: its journal events)."""
    for event in recorded:
        if event.kind == DONE_EVENT:
            announce(Wake("finished", answer_key(run_id, event.target), using, workflow_id))


__all__ = ["DONE_EVENT", "announce_answers", "answer_key"]
