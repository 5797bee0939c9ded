"""Errors as JSON records, and back (journal, run error, API).

A recorded error is a dict ``{"type", "message", "code"?, "fields"?}``. The
errors the engine itself raises into a workflow (``ActivityError``,
``ChildWorkflowError``, ``WorkflowTimeoutError``) are rebuilt with their
fields on replay, so ``except ActivityError as e: e.attempts`` behaves the
same live and replayed.
"""

from __future__ import annotations

import traceback
from typing import Any

from weft_django import errors as weft_errors

_BY_CODE: dict[str, type[weft_errors.WeftError]] = {
    cls.code: cls for cls in weft_errors.ERROR_CLASSES
}


def error_record(exc: BaseException, *, with_traceback: bool = False) -> dict[str, Any]:
    record: dict[str, Any] = {"type": type(exc).__name__, "message": str(exc)}
    if isinstance(exc, weft_errors.WeftError):
        # The constructor fields by name (not ``as_dict()``, whose keys may be
        # renamed, e.g. ActivityError's "error_message"), so ``rebuild_error``
        # can call the class with them.
        record["code"] = exc.code
        record["fields"] = _jsonable(exc.fields())
    if with_traceback:
        record["traceback"] = "".join(
            traceback.format_exception(type(exc), exc, exc.__traceback__)
        )[-4000:]
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
            return cls(**fields)
        except TypeError:
            pass
    return RecordedError(record)


class RecordedError(Exception):
    """An error recorded from user code, re-raised into a workflow."""

    def __init__(self, record: dict[str, Any]) -> None:
        super().__init__(f"{record.get('type', 'Error')}: {record.get('message', '')}")
        self.record = record
        self.type_name = record.get("type")
