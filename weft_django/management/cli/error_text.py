"""A recorded error as a person reads it in a terminal: a headline, then the traceback.

The invariant it protects: the text shows the recorded error whole -- the
``type: message`` headline on one line, the traceback on as many lines as
it has (never a dict repr with ``\\n`` escapes) -- and the JSON output keeps
the recorded dict as it is stored.
"""

from __future__ import annotations

from typing import Any


def headline(error: Any) -> str:
    """``Type: message`` of a recorded error (any other value as its text)."""
    if isinstance(error, dict):
        kind = error.get("type") or "Error"
        message = error.get("message")
        return f"{kind}: {message}" if message else str(kind)
    return str(error)


def error_lines(error: Any, indent: str = "") -> list[str]:
    """The headline, then the recorded traceback's lines (if any), indented."""
    lines = [indent + headline(error)]
    trace = error.get("traceback") if isinstance(error, dict) else None
    if isinstance(trace, str) and trace.strip():
        lines.append("")
        lines += [indent + line for line in trace.rstrip("\n").splitlines()]
    return lines


__all__ = ["error_lines", "headline"]
