"""``ctx.set_event`` / ``ctx.write_stream`` / ``ctx.close_stream``: what a body publishes.

Invariant: a published value is a *recorded value* of the journal, like
``ctx.now()`` (``WorkflowRuntime.side_effect``): the first time the body
reaches the call it is recorded; a replay reaches the same call, finds the
entry and records nothing -- so a replay or a takeover never publishes twice.
The rows readers see (``published_models``) are written only by the fenced
batch that records the entry (``engine.turn.publish``).

A stream's offsets are counted here, per key, from the calls the body made
-- recorded ones included, since a replay re-runs the body from its start --
so they are a function of the journal: the n-th write of a key has offset
n on every engine that ever drives the run, and a takeover can neither skip
nor repeat one. This module touches no database (the body runs with
database access refused).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from weft_django.conf import get_settings
from weft_django.engine.workflow.payload import normalize
from weft_django.errors import PayloadError
from weft_django.kernel.attribute_types import check_value, to_json

PublishKind = Literal["set-event", "stream-write", "stream-close", "search-attributes"]
"""The journal kinds of published values (stored; never renamed)."""

PUBLISH_KINDS: frozenset[str] = frozenset(
    {"set-event", "stream-write", "stream-close", "search-attributes"}
)

#: Longest event or stream key (the rows' ``key`` column).
MAX_KEY_LENGTH = 100


class _Runtime(Protocol):
    def side_effect(self, kind: Any, target: str, make: Any) -> Any: ...


@dataclass
class StreamState:
    """Per-body counters: the next offset of each stream, the streams closed."""

    offsets: dict[str, int] = field(default_factory=dict)
    closed: set[str] = field(default_factory=set)


def check_key(what: str, key: Any) -> str:
    """``key`` if it is a non-empty string of at most ``MAX_KEY_LENGTH`` characters."""
    if not isinstance(key, str) or not key or len(key) > MAX_KEY_LENGTH:
        raise PayloadError(
            what, f"must be a non-empty string of at most {MAX_KEY_LENGTH} characters, got {key!r}"
        )
    return key


def set_event(runtime: _Runtime, key: str, value: Any) -> None:
    check_key("event key", key)
    stored = normalize(f"event {key!r}", value)  # refused at the call: too big, not JSON
    runtime.side_effect("set-event", key, lambda: stored)


def write_stream(runtime: _Runtime, state: StreamState, key: str, value: Any) -> int:
    check_key("stream key", key)
    if key in state.closed:
        raise PayloadError(f"stream {key!r}", "is closed: nothing more can be written to it")
    stored = normalize(f"stream {key!r} value", value)
    offset = state.offsets.get(key, 0)
    runtime.side_effect("stream-write", key, lambda: {"offset": offset, "value": stored})
    state.offsets[key] = offset + 1
    return offset


def close_stream(runtime: _Runtime, state: StreamState, key: str) -> None:
    check_key("stream key", key)
    if key in state.closed:
        return  # closing twice records nothing
    offset = state.offsets.get(key, 0)
    runtime.side_effect("stream-close", key, lambda: {"offset": offset})
    state.closed.add(key)
    state.offsets[key] = offset + 1


def upsert_search_attributes(runtime: _Runtime, attrs: dict[str, Any]) -> None:
    """Record new values of declared search attributes (``None`` unsets one).

    Checked here, in the body, before anything is recorded: an undeclared
    name or a value of another type is a ``TypeError`` (a value out of range
    a ``ValueError``) naming it. The entry's target is the sorted names, so
    a replay of changed code that upserts other names diverges, as a
    changed ``set_event`` key does. Its result is ``{name: [type, value]}``
    (a datetime as ISO 8601): the rows are written from it, by the turn's
    fenced batch (``engine.turn.publish``).
    """
    if not attrs:
        return
    declared = get_settings().search_attributes
    recorded: dict[str, list[Any]] = {}
    for name in sorted(attrs):
        value = attrs[name]
        kind = declared.get(name)
        if kind is None:
            known = ", ".join(sorted(declared)) or "none are declared"
            raise TypeError(
                f"ctx.upsert_search_attributes: {name!r} is not a declared search attribute "
                f"(WEFT['SEARCH_ATTRIBUTES']: {known})"
            )
        if value is not None:
            try:
                value = check_value(name, kind, value)
            except (TypeError, ValueError) as exc:
                raise type(exc)(f"ctx.upsert_search_attributes: {exc}") from None
        recorded[name] = [kind, to_json(kind, value)]
    target = ",".join(recorded)[:200]
    runtime.side_effect("search-attributes", target, lambda: recorded)


__all__ = [
    "MAX_KEY_LENGTH",
    "PUBLISH_KINDS",
    "PublishKind",
    "StreamState",
    "check_key",
    "close_stream",
    "set_event",
    "upsert_search_attributes",
    "write_stream",
]
