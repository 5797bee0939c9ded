"""Tracebacks as stored text: an activity's own, bounded, with project-relative paths.

The invariants it protects:

* **Never lost, never a failure.** ``format_traceback`` turns any exception
  into text -- one whose ``__str__`` raises, one that cannot be pickled, one
  from a recursion thousands of frames deep -- and never raises itself.
* **Cut visibly.** Text over its bound keeps its head and its tail (where
  the raise line is) with an explicit marker saying how many characters
  were left out between them; nothing is cut silently.
* **Readable paths.** A frame under the project (``settings.BASE_DIR``, else
  the working directory) is shown relative to it; others keep their path.

``ActivityTraceback`` is how an activity's traceback travels with the
``ActivityError`` the workflow sees: it is the error's ``__cause__`` (as
``concurrent.futures`` carries a worker process's traceback), so Python's
own formatting prints the activity's frames first and the workflow-side
frames after "The above exception was the direct cause of ...".
"""

from __future__ import annotations

import os
import traceback

from django.conf import settings

TRACEBACK_LIMIT = 16_000
"""The most characters of traceback text stored for one error."""

MESSAGE_LIMIT = 4_000
"""The most characters of an error message stored for one error."""

CAUSE_SEPARATOR = "The above exception was the direct cause of the following exception:"
"""Between an activity's traceback and the workflow-side frames (Python's own words)."""

_HEAD_SHARE = 0.3  # of the bound kept from the start; the rest from the end


def bounded(text: str, limit: int) -> str:
    """``text``, or its head and tail around a marker saying how much was cut."""
    if len(text) <= limit:
        return text
    head = int(limit * _HEAD_SHARE)
    tail = limit - head
    left_out = len(text) - head - tail
    return f"{text[:head]}\n... [{left_out} characters left out] ...\n{text[-tail:]}"


def safe_str(exc: BaseException) -> str:
    """``str(exc)``, or a placeholder naming the type when its ``__str__`` raises."""
    try:
        return str(exc)
    except Exception:  # user code: any failure of __str__ is survived
        return f"<{type(exc).__name__}: str() failed>"


def project_root() -> str:
    """The directory paths are shown relative to (with a trailing separator)."""
    base = getattr(settings, "BASE_DIR", None) if settings.configured else None
    root = os.fspath(base) if base else os.getcwd()
    return os.path.join(os.path.abspath(root), "")


def relative_paths(text: str) -> str:
    """``text`` with ``File "<project>/x.py"`` shown as ``File "x.py"``."""
    return text.replace(f'File "{project_root()}', 'File "')


_ENGINE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def format_traceback(
    exc: BaseException, limit: int = TRACEBACK_LIMIT, *, skip_engine: bool = False
) -> str:
    """The full traceback of ``exc`` (its causes first), bounded, paths relative.

    ``skip_engine``: leave out the engine's own frames before the first frame
    of user code (the executor's call of the activity function).
    """
    try:
        cause = exc.__cause__
        chain = not isinstance(cause, ActivityTraceback)
        report = traceback.TracebackException.from_exception(exc)
        if skip_engine:
            frames = list(report.stack)
            while len(frames) > 1 and frames[0].filename.startswith(_ENGINE_DIR):
                frames.pop(0)
            report.stack = traceback.StackSummary.from_list(frames)
        text = "".join(report.format(chain=chain))
        if isinstance(cause, ActivityTraceback):  # the activity's frames, then the workflow's
            text = f"{cause.text.rstrip()}\n\n{CAUSE_SEPARATOR}\n\n{text}"
    except Exception:  # a traceback must never fail the turn
        try:
            lines = "".join(traceback.format_tb(exc.__traceback__))
        except Exception:
            lines = ""
        last = f"{type(exc).__name__}: {safe_str(exc)}"
        text = f"Traceback (most recent call last):\n{lines}{last}\n"
    return bounded(relative_paths(text), limit)


class ActivityTraceback(Exception):
    """The traceback of an activity's own exception, as the ``__cause__`` of the
    ``ActivityError`` a workflow sees; ``text`` is the stored traceback."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text

    def __str__(self) -> str:
        return f'\n"""\n{self.text.rstrip()}\n"""'


def activity_cause(exc: BaseException) -> ActivityTraceback:
    """The ``ActivityTraceback`` of an activity's exception ``exc``."""
    return ActivityTraceback(format_traceback(exc, TRACEBACK_LIMIT // 2, skip_engine=True))


__all__ = [
    "CAUSE_SEPARATOR",
    "MESSAGE_LIMIT",
    "TRACEBACK_LIMIT",
    "ActivityTraceback",
    "activity_cause",
    "bounded",
    "format_traceback",
    "project_root",
    "relative_paths",
    "safe_str",
]
