"""The shape of a weft Celery message, checked before a task body reads it.

Why: a broker delivers whatever was published to the queue -- a message
from an older or newer weft, a hand-written ``send_task``, a corrupted or
hostile body. A task body that trusted its arguments would raise inside
the worker (a ``ValidationError`` from a run id that is not a UUID, a
``TypeError`` from a missing argument), which Celery logs as a crash with
the arguments -- a routed message's token among them -- and, for some
values, could reach the database. So each weft task takes ``*args,
**kwargs`` (a wrong arity cannot raise before this check) and calls one
parser here; a message that does not parse is discarded with ONE warning
naming the task and what was wrong (never the values of a routed message,
whose token is a credential), nothing is read or written, and the node goes
on. Discarding is always safe: polling re-sends every wake that is still
due, and the owner of a routed attempt times it out and retries by policy.

Unknown keyword arguments are ignored (a newer sender may add options);
the positional arguments and the types of the known ones are exact.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass, fields
from typing import Any

from weft_django.engine.activities.routed_dispatch import RoutedMessage
from weft_django.ownership.codec import (
    MAX_ENGINE_ID_LENGTH,
    MAX_EPOCH_EXCLUSIVE,
    MAX_TIMESTAMP_EXCLUSIVE,
)

logger = logging.getLogger("weft_django.transports.celery")

#: Longest ``str`` accepted where a message names a workflow id or a wake kind.
MAX_NAME_LENGTH = 200
#: A busy re-send counts its attempts; anything larger was not sent by weft.
MAX_ATTEMPT = 1000


class MalformedMessage(ValueError):
    """A weft task's arguments do not have the shape weft sends."""


@dataclass(frozen=True)
class DriveArgs:
    run_id: str
    wake_kind: str | None
    engine_id: str
    epoch: int
    via: str = "celery"
    due_ms: int | None = None
    attempt: int = 0
    workflow_id: str = ""


@dataclass(frozen=True)
class PickupArgs:
    run_id: str
    due_ms: int | None = None
    workflow_id: str = ""
    attempt: int = 0


def _int(name: str, value: Any, low: int, high_exclusive: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise MalformedMessage(f"{name} must be an int, got {type(value).__name__}")
    if not low <= value < high_exclusive:
        raise MalformedMessage(f"{name} must be in [{low}, {high_exclusive}), got {value}")
    return value


def _str(name: str, value: Any, max_length: int, *, empty: bool = True) -> str:
    if not isinstance(value, str):
        raise MalformedMessage(f"{name} must be a str, got {type(value).__name__}")
    if len(value) > max_length or (not empty and not value):
        raise MalformedMessage(f"{name} must be 1..{max_length} characters, got {len(value)}")
    return value


def _run_id(value: Any) -> str:
    text = _str("run_id", value, 36, empty=False)
    try:
        return str(uuid.UUID(text))
    except ValueError:
        raise MalformedMessage(f"run_id must be a UUID, got {text[:36]!r}") from None


def _due(value: Any) -> int | None:
    return None if value is None else _int("due_ms", value, 0, MAX_TIMESTAMP_EXCLUSIVE)


def _arity(task: str, args: tuple[Any, ...], wanted: tuple[str, ...]) -> None:
    if len(args) != len(wanted):
        raise MalformedMessage(
            f"{task} takes {len(wanted)} positional argument(s) ({', '.join(wanted)}), "
            f"got {len(args)}"
        )


def parse_drive(args: tuple[Any, ...], kwargs: dict[str, Any]) -> DriveArgs:
    """``weft.drive(run_id, wake_kind, engine_id, epoch, **options)``."""
    _arity("weft.drive", args, ("run_id", "wake_kind", "engine_id", "epoch"))
    run_id, wake_kind, engine_id, epoch = args
    return DriveArgs(
        _run_id(run_id),
        None if wake_kind is None else _str("wake_kind", wake_kind, MAX_NAME_LENGTH),
        _str("engine_id", engine_id, MAX_ENGINE_ID_LENGTH, empty=False),
        _int("epoch", epoch, 0, MAX_EPOCH_EXCLUSIVE),
        via=_str("via", kwargs.get("via", "celery"), MAX_NAME_LENGTH),
        due_ms=_due(kwargs.get("due_ms")),
        attempt=_int("attempt", kwargs.get("attempt", 0), 0, MAX_ATTEMPT + 1),
        workflow_id=_str("workflow_id", kwargs.get("workflow_id", ""), MAX_NAME_LENGTH),
    )


def parse_pickup(args: tuple[Any, ...], kwargs: dict[str, Any]) -> PickupArgs:
    """``weft.pickup(run_id, due_ms=, workflow_id=, attempt=)``."""
    _arity("weft.pickup", args, ("run_id",))
    return PickupArgs(
        _run_id(args[0]),
        due_ms=_due(kwargs.get("due_ms")),
        workflow_id=_str("workflow_id", kwargs.get("workflow_id", ""), MAX_NAME_LENGTH),
        attempt=_int("attempt", kwargs.get("attempt", 0), 0, MAX_ATTEMPT + 1),
    )


#: Each field of a routed message and the check of its value.
_ROUTED_FIELDS: dict[str, Any] = {
    "token": lambda v: _str("token", v, 512, empty=False),
    "activity": lambda v: _str("activity", v, 1000, empty=False),
    "queue": lambda v: _str("queue", v, 1000, empty=False),
    "args": lambda v: v if isinstance(v, list) else _wrong("args", "a list", v),
    "kwargs": lambda v: (
        v
        if isinstance(v, dict) and all(isinstance(k, str) for k in v)
        else _wrong("kwargs", "an object with string keys", v)
    ),
    "workflow_id": lambda v: _str("workflow_id", v, MAX_NAME_LENGTH, empty=False),
    "run_id": _run_id,
    "position": lambda v: _int("position", v, 0, MAX_EPOCH_EXCLUSIVE),
    "attempt": lambda v: _int("attempt", v, 0, MAX_EPOCH_EXCLUSIVE),
    "epoch": lambda v: _int("epoch", v, 0, MAX_EPOCH_EXCLUSIVE),
    "idempotency_key": lambda v: _str("idempotency_key", v, 1000),
    "deadline_ms": lambda v: None if v is None else _int("deadline_ms", v, 0, 2**53),
    "trace_context": lambda v: (
        v
        if v is None or (isinstance(v, dict) and all(isinstance(x, str) for x in (*v, *v.values())))
        else _wrong("trace_context", "null or an object of strings", v)
    ),
}
_REQUIRED = {f.name for f in fields(RoutedMessage)} - {"trace_context"}


def _wrong(name: str, wanted: str, value: Any) -> Any:
    raise MalformedMessage(f"{name} must be {wanted}, got {type(value).__name__}")


def parse_routed(args: tuple[Any, ...], kwargs: dict[str, Any]) -> RoutedMessage:
    """``weft.run_routed_activity(message)``: ``message`` a ``RoutedMessage.as_json()``."""
    _arity("weft.run_routed_activity", args, ("message",))
    (data,) = args
    if not isinstance(data, dict):
        raise MalformedMessage(f"message must be an object, got {type(data).__name__}")
    missing = sorted(_REQUIRED - set(data))
    if missing:
        raise MalformedMessage(f"message lacks {', '.join(missing)}")
    checked = {name: check(data.get(name)) for name, check in _ROUTED_FIELDS.items()}
    return RoutedMessage(**checked)


def discard(task: str, error: MalformedMessage) -> dict[str, str]:
    """Log ONE warning for a malformed ``task`` message; the task's result."""
    logger.warning(
        "discarded a malformed %s message: %s (nothing was read or written)",
        task,
        error,
        extra={"weft": {"event": "malformed_message", "task": task, "reason": str(error)}},
    )
    return {"outcome": "malformed", "workflow_id": "", "run_id": ""}


__all__ = [
    "MAX_ATTEMPT",
    "DriveArgs",
    "MalformedMessage",
    "PickupArgs",
    "discard",
    "parse_drive",
    "parse_pickup",
    "parse_routed",
]
