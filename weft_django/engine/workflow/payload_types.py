"""Typed payloads: dataclasses and pydantic models become plain JSON values.

The journal stores JSON, and a workflow body must see the same value live and on replay. A
dataclass or pydantic model that crosses a durable boundary (a workflow's input or result,
an activity's result, a signal payload, a child's input) is therefore converted to its
plain JSON value *before* anything is checked, sized or written, by this one function, at
every boundary (``engine.workflow.payload.dumps`` / ``normalize`` and the replay's
``engine.replay.sandbox.json_copy``). The receiver gets that JSON value -- a ``dict`` --
never the instance, and it is the same ``dict`` live and on replay.

The conversion, exactly:

- a dataclass *instance* becomes ``{field.name: value}`` over
  ``dataclasses.fields`` in declaration order (what ``dataclasses.asdict``
  gives), with every field value converted the same way, recursively;
- a pydantic v2 ``BaseModel`` instance becomes ``model_dump(mode="json")``
  (pydantic's own JSON mode: its aliases are *not* applied, datetimes are
  pydantic's ISO strings). pydantic is never imported here: if no code
  imported it, no model instance can exist;
- ``dict`` values and ``list``/``tuple`` items are converted recursively
  (a tuple becomes a list, as JSON would make it);
- anything else is returned unchanged, so the JSON encoder (Django's, for
  ``datetime``, ``Decimal``, ``UUID``) accepts it or the caller's
  ``PayloadError`` names the type it could not encode.

No typed round trip: rebuilding the instance from an annotation would make
a stored journal's meaning depend on today's class definitions (a renamed
field would change what an old run's replay sees). A body that wants the
type back builds it itself (``Order(**value)``, ``Order.model_validate(value)``).
"""

from __future__ import annotations

import dataclasses
import sys
from typing import Any

_SCALARS = (str, int, float, bool, type(None))


def _pydantic_dump(value: Any) -> tuple[bool, Any]:
    pydantic = sys.modules.get("pydantic")
    if pydantic is None:
        return False, None
    base = getattr(pydantic, "BaseModel", None)
    if base is None or not isinstance(value, base):
        return False, None
    dump = getattr(value, "model_dump", None)
    if dump is None:  # pydantic v1: left to the encoder, which names its type
        return False, None
    return True, dump(mode="json")


def to_json_value(value: Any) -> Any:
    """``value`` with every dataclass / pydantic model replaced by its JSON value."""
    if isinstance(value, _SCALARS):
        return value
    if isinstance(value, dict):
        return {key: to_json_value(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [to_json_value(item) for item in value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            field.name: to_json_value(getattr(value, field.name))
            for field in dataclasses.fields(value)
        }
    dumped, plain = _pydantic_dump(value)
    if dumped:
        return plain
    return value


__all__ = ["to_json_value"]
