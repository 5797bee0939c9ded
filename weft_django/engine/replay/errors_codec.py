"""Errors as JSON records, and back (journal, run error, API).

A recorded error is a dict ``{"type", "message", "code"?, "fields"?,
"traceback"?}``. The
errors the engine itself raises into a workflow (``ActivityError``,
``ChildWorkflowError``, ``WorkflowTimeoutError``) are rebuilt with their
fields on replay, so ``except ActivityError as e: e.attempts`` behaves the
same live and replayed.

An ``ActivityError`` carries its activity's own traceback as its
``__cause__`` (``tracebacks.ActivityTraceback``): the record keeps that text
as ``"traceback"`` even without ``with_traceback``, and ``rebuild_error``
puts it back as the cause, so the workflow (and the run's error when the
workflow does not catch it) shows where inside the activity it raised.
Texts are bounded with a visible marker (``tracebacks.bounded``).
"""

from __future__ import annotations

from typing import Any

from weft_django import errors as weft_errors
from weft_django.engine.replay.tracebacks import (
    CAUSE_SEPARATOR,
    MESSAGE_LIMIT,
    ActivityTraceback,
    bounded,
    format_traceback,
    safe_str,
)

_BY_CODE: dict[str, type[weft_errors.WeftError]] = {
    cls.code: cls for cls in weft_errors.ERROR_CLASSES
}


def error_record(exc: BaseException, *, with_traceback: bool = False) -> dict[str, Any]:
    record: dict[str, Any] = {
        "type": type(exc).__name__,
        "message": bounded(safe_str(exc), MESSAGE_LIMIT),
    }
    if isinstance(exc, weft_errors.WeftError):
        # The constructor fields by name (not ``as_dict()``, whose keys may be
        # renamed, e.g. ActivityError's "error_message"), so ``rebuild_error``
        # can call the class with them.
        record["code"] = exc.code
        record["fields"] = _jsonable(exc.fields())
    if with_traceback:
        record["traceback"] = format_traceback(exc)
    elif isinstance(exc.__cause__, ActivityTraceback):
        record["traceback"] = exc.__cause__.text
    return record


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return str(value)


def rebuild_error(record: Any) -> BaseException:
    """The exception a recorded error stands for (fail-safe: never raises)."""
    if not isinstance(record, dict):
        return weft_errors.ActivityError("unknown", str(record))
    code = record.get("code")
    fields = record.get("fields")
    cls = _BY_CODE.get(code) if isinstance(code, str) else None
    if cls is not None and isinstance(fields, dict):
        try:
            rebuilt: BaseException = cls(**fields)
        except TypeError:
            pass
        else:
            text = record.get("traceback")
            if cls is weft_errors.ActivityError and isinstance(text, str) and text:
                rebuilt.__cause__ = ActivityTraceback(_activity_part(text))
            return rebuilt
    return RecordedError(record)


def _activity_part(text: str) -> str:
    """The activity's own traceback out of a stored one (a run error's whole
    traceback starts with it, before the workflow-side frames)."""
    return text.split(f"\n\n{CAUSE_SEPARATOR}\n\n", 1)[0]


class RecordedError(Exception):
    """An error recorded from user code, re-raised into a workflow."""

    def __init__(self, record: dict[str, Any]) -> None:
        super().__init__(f"{record.get('type', 'Error')}: {record.get('message', '')}")
        self.record = record
        self.type_name = record.get("type")
