"""Runs by filter: ``list_runs``, ``count_runs``, and ``cancel_many``,
``resume_many``, ``retry_many``.

Invariant of the ``…_many`` actions (``engine.operations.bulk``): the
matched runs are walked in chunks of ``chunk_size``, each ONE fenced batch,
so an interruption leaves every run done or untouched and calling again
finishes the rest (a run not in a status the action applies to is
``skipped``). ``dry_run=True`` counts and changes nothing. An empty filter
is refused (``InvalidRunFilter``) unless ``allow_all=True``.
``progress(done, total)`` after each chunk.
"""

from __future__ import annotations

from typing import Protocol

from weft_django.client.aio import asyncify
from weft_django.engine.operations.bulk import (
    DEFAULT_CHUNK_SIZE,
    BulkAction,
    BulkResult,
    Progress,
    run_many,
)
from weft_django.engine.runs.filters import RunFilter
from weft_django.engine.runs.listing import count_runs, list_runs

alist_runs = asyncify(list_runs)
acount_runs = asyncify(count_runs)


class Many(Protocol):
    """The shape of ``cancel_many``, ``resume_many`` and ``retry_many``."""

    def __call__(
        self,
        filter: RunFilter,
        *,
        dry_run: bool = False,
        allow_all: bool = False,
        reason: str = "",
        progress: Progress | None = None,
        chunk_size: int = DEFAULT_CHUNK_SIZE,
        actor: str = "client",
    ) -> BulkResult: ...


def _many(action: BulkAction, doc: str) -> Many:
    """The client function applying ``action`` to every run a filter matches."""

    def many(
        filter: RunFilter,
        *,
        dry_run: bool = False,
        allow_all: bool = False,
        reason: str = "",
        progress: Progress | None = None,
        chunk_size: int = DEFAULT_CHUNK_SIZE,
        actor: str = "client",
    ) -> BulkResult:
        return run_many(
            action,
            filter,
            dry_run=dry_run,
            allow_all=allow_all,
            reason=reason,
            progress=progress,
            chunk_size=chunk_size,
            actor=actor,
        )

    many.__name__ = many.__qualname__ = f"{action}_many"
    many.__doc__ = doc
    return many


cancel_many = _many(
    "cancel",
    """Cancel every live run ``filter`` matches (with its live descendants).

    A run whose workflow declares a ``cancel_grace`` gets the graceful
    request, as ``cancel`` would give it; one already asked is skipped.""",
)
acancel_many = asyncify(cancel_many)

resume_many = _many(
    "resume",
    """Resume every ``suspended`` run ``filter`` matches (``reason`` is accepted
    for one shape and not recorded).""",
)
aresume_many = asyncify(resume_many)

retry_many = _many(
    "retry",
    """Retry every ``failed`` or ``timed_out`` run ``filter`` matches that is
    still its workflow id's latest run (an older one is ``skipped``: retrying
    it would make two live runs of one id).""",
)
aretry_many = asyncify(retry_many)

__all__ = [
    "BulkResult",
    "Many",
    "acancel_many",
    "acount_runs",
    "alist_runs",
    "aresume_many",
    "aretry_many",
    "cancel_many",
    "count_runs",
    "list_runs",
    "resume_many",
    "retry_many",
]
