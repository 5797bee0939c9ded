"""Versioning markers: ``ctx.patched`` and ``ctx.deprecate_patch`` (Temporal's semantics).

A change to a live workflow goes through three deploys, and the journal's
``patch`` marker is what lets each one replay the runs of the one before:

1. ``if ctx.patched("id"): new() else: old()`` -- a run reaching the call live
   records the marker and takes ``new``; a run that passed the point before
   (no marker there) replays ``old``.
2. ``ctx.deprecate_patch("id"); new()`` -- once no live run can replay the
   ``old`` branch (``manage.py weft_replay_check`` says so). The call consumes
   the marker where a run recorded one, so those runs still replay; a run
   reaching it live records a *deprecated* marker (still ``True`` for the
   step-1 code, so both releases may run side by side). A run that passed the
   point without a marker now replays ``new`` and diverges where its journal
   recorded ``old``'s commands -- exactly what the replay check reports.
3. Remove the call. A deprecated marker with no call at its place is skipped
   on replay; a step-1 marker still is not (removing ``patched`` while runs
   recorded it is a divergence, as it always was).
"""

from __future__ import annotations

from typing import Any, Final

DEPRECATED_MARKER: Final[dict[str, bool]] = {"deprecated": True}
"""The ``result`` of a ``patch`` event recorded by ``deprecate_patch`` (``patched``
records ``True``)."""


def is_deprecated_marker(kind: str, result: Any) -> bool:
    """A ``patch`` event replay may skip when no call stands at its place."""
    return kind == "patch" and result == DEPRECATED_MARKER
