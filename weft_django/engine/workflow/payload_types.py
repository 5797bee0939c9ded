"""Typed payloads: the one place a value is encoded to JSON and rebuilt from it.

The journal stores JSON, and a workflow body must see the same value live and
on replay. Every value that crosses a durable boundary is encoded here
(``to_json_value``) before anything is checked, sized or written
(``engine.workflow.payload.dumps`` / ``normalize``, the replay's
``engine.replay.sandbox.json_copy``); every value handed back to code that
declared its type is rebuilt here (``rebuilder`` / ``RebuildError``) from that
stored JSON -- so live and replayed bodies get the same instance, built from
the same JSON by the same function.

Encoding, exactly:

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

Rebuilding (``rebuilder(annotation, where)``), decided once per annotation
when it is declared (``@workflow``, ``@activity``, ``wait_for_signal(type=)``,
``on_update``, ``on_query``): a dataclass, a pydantic v2 model, ``list`` /
``tuple`` / ``dict[str, ...]`` / ``Optional`` / unions of them, and the
scalars they hold (``datetime``, ``date``, ``Decimal``, ``UUID``, enums from
their JSON form). An annotation that needs no rebuilding (``Any``, JSON
scalars, plain ``dict``/``list``, ``TypedDict``, ``Literal``) gives ``None``:
the value is handed over as stored, at no cost. Any other class is refused
then, with its name (``TypeError``), so nothing is ever recorded for a type
that could not come back. A stored value that no longer fits (a deploy
renamed a field) raises ``RebuildError`` naming the field; the replay turns
it into a suspended run, never a failed one.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as _dt
import enum
import sys
import types
import typing
import uuid
from collections.abc import Callable
from decimal import Decimal, InvalidOperation
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


# -- rebuilding -----------------------------------------------------------------

Rebuild = Callable[[Any, str], Any]
"""``rebuild(value, path)``: the stored JSON ``value`` as the declared type."""


class RebuildError(ValueError):
    """A stored value does not fit its declared type: ``path`` names the field."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path or 'the value'}: {reason}")
        self.path = path or "the value"
        self.reason = reason


_PASS_THROUGH: frozenset[Any] = frozenset(
    {Any, object, str, int, float, bool, type(None), None, dict, list, typing.Literal}
)
_FROM_STRING: dict[type, Callable[[str], Any]] = {
    _dt.datetime: _dt.datetime.fromisoformat,
    _dt.date: _dt.date.fromisoformat,
    _dt.time: _dt.time.fromisoformat,
    Decimal: Decimal,
    uuid.UUID: uuid.UUID,
    _dt.timedelta: lambda text: _duration(text),
}
_CACHE: dict[Any, Rebuild | None] = {}


def _duration(text: str) -> _dt.timedelta:
    from django.utils.dateparse import parse_duration

    parsed = parse_duration(text)
    if parsed is None:
        raise ValueError(text)
    return parsed


def _got(value: Any) -> str:
    return f"got {type(value).__name__} {value!r:.60}"


def _pydantic_model(annotation: Any) -> bool:
    pydantic = sys.modules.get("pydantic")
    base = getattr(pydantic, "BaseModel", None) if pydantic is not None else None
    return base is not None and isinstance(annotation, type) and issubclass(annotation, base)


def rebuilder(annotation: Any, where: str) -> Rebuild | None:
    """How to rebuild a stored value declared as ``annotation`` (``None``: as stored).

    ``TypeError`` naming ``annotation`` and ``where`` when it is a class this
    module cannot rebuild from JSON (decided at declaration time)."""
    try:
        return _CACHE[annotation]
    except (KeyError, TypeError):
        pass
    made = _compile(annotation, where)
    with contextlib.suppress(TypeError):  # an unhashable annotation: compiled each time
        _CACHE[annotation] = made
    return made


def _compile(annotation: Any, where: str) -> Rebuild | None:
    try:
        if annotation in _PASS_THROUGH:
            return None
    except TypeError:  # an unhashable annotation
        pass
    if isinstance(annotation, typing.TypeVar | str):
        return None
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return rebuilder(typing.get_args(annotation)[0], where)
    if origin is typing.Union or origin is types.UnionType:
        return _union(typing.get_args(annotation), where)
    if origin is not None:
        return _generic(origin, typing.get_args(annotation), where)
    supertype = getattr(annotation, "__supertype__", None)  # typing.NewType
    if supertype is not None:
        return rebuilder(supertype, where)
    if not isinstance(annotation, type):
        return None  # a typing special form (Never, LiteralString, ...): nothing to rebuild
    if typing.is_typeddict(annotation) or annotation is tuple:
        return None
    if dataclasses.is_dataclass(annotation):
        return _dataclass(annotation, where)
    if _pydantic_model(annotation):
        return _model(annotation)
    if annotation is float:
        return None
    if issubclass(annotation, enum.Enum):
        return _enum(annotation)
    if annotation in _FROM_STRING:
        return _from_string(annotation, _FROM_STRING[annotation])
    raise TypeError(
        f"{where} is annotated {getattr(annotation, '__qualname__', annotation)!r}, which cannot "
        "be rebuilt from the JSON the journal stores: declare a dataclass, a pydantic model, "
        "a JSON type (str, int, float, bool, list, dict), or Any"
    )


def _union(members: tuple[Any, ...], where: str) -> Rebuild | None:
    parts = [(m, rebuilder(m, where)) for m in members if m is not type(None)]
    nullable = len(parts) < len(members)
    if all(part is None for _, part in parts):
        return None

    def rebuild(value: Any, path: str) -> Any:
        if value is None and nullable:
            return None
        error: RebuildError | None = None
        for _, part in parts:
            if part is None:
                return value
            try:
                return part(value, path)
            except RebuildError as exc:
                error = error or exc
        assert error is not None
        raise error

    return rebuild


def _generic(origin: Any, args: tuple[Any, ...], where: str) -> Rebuild | None:
    if origin in (list, tuple, set, frozenset) or origin in _SEQUENCES:
        if (origin is tuple and len(args) != 2) or (origin is tuple and args[1] is not ...):
            items = [rebuilder(arg, where) for arg in args]
            if all(item is None for item in items):
                return None
            return _fixed_tuple(items)
        item = rebuilder(args[0], where) if args else None
        if item is None and origin is not tuple:
            return None
        return _sequence(tuple if origin is tuple else list, item)
    if origin is dict or origin in _MAPPINGS:
        value_part = rebuilder(args[1], where) if len(args) == 2 else None
        return None if value_part is None else _mapping(value_part)
    return None  # Generator, Callable, ...: not a payload shape


_SEQUENCES = (typing.get_origin(typing.Sequence[int]), typing.get_origin(typing.List[int]))  # noqa: UP006
_MAPPINGS = (typing.get_origin(typing.Mapping[str, int]), typing.get_origin(typing.Dict[str, int]))  # noqa: UP006


def _sequence(kind: type, item: Rebuild | None) -> Rebuild:
    def rebuild(value: Any, path: str) -> Any:
        if not isinstance(value, list):
            raise RebuildError(path, f"expected a list, {_got(value)}")
        if item is None:
            return kind(value)
        return kind(item(v, f"{path}[{i}]") for i, v in enumerate(value))

    return rebuild


def _fixed_tuple(items: list[Rebuild | None]) -> Rebuild:
    def rebuild(value: Any, path: str) -> Any:
        if not isinstance(value, list) or len(value) != len(items):
            raise RebuildError(path, f"expected a list of {len(items)} items, {_got(value)}")
        return tuple(
            v if part is None else part(v, f"{path}[{i}]")
            for i, (part, v) in enumerate(zip(items, value, strict=True))
        )

    return rebuild


def _mapping(part: Rebuild) -> Rebuild:
    def rebuild(value: Any, path: str) -> Any:
        if not isinstance(value, dict):
            raise RebuildError(path, f"expected an object, {_got(value)}")
        return {k: part(v, f"{path}.{k}" if path else str(k)) for k, v in value.items()}

    return rebuild


def _scalar_check(annotation: Any) -> Rebuild | None:
    """Field-level check of a JSON scalar (a top-level one is handed over as stored)."""
    if annotation is bool or annotation is str:
        kind = annotation

        def check(value: Any, path: str) -> Any:
            if not isinstance(value, kind):
                raise RebuildError(path, f"expected {kind.__name__}, {_got(value)}")
            return value

        return check
    if annotation is int or annotation is float:
        want = annotation

        def number(value: Any, path: str) -> Any:
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise RebuildError(path, f"expected {want.__name__}, {_got(value)}")
            if want is int and not isinstance(value, int):
                raise RebuildError(path, f"expected int, {_got(value)}")
            return want(value)

        return number
    return None


def _dataclass(cls: type, where: str) -> Rebuild:
    fields: list[tuple[str, Rebuild | None, bool]] = []

    def rebuild(value: Any, path: str) -> Any:
        if not isinstance(value, dict):
            raise RebuildError(path, f"expected an object for {cls.__qualname__}, {_got(value)}")
        kwargs: dict[str, Any] = {}
        for name, part, required in fields:
            field_path = f"{path}.{name}" if path else name
            if name not in value:
                if required:
                    raise RebuildError(field_path, f"missing (required by {cls.__qualname__})")
                continue
            item = value[name]
            kwargs[name] = item if part is None else part(item, field_path)
        try:
            return cls(**kwargs)
        except (TypeError, ValueError) as exc:
            raise RebuildError(path, f"{cls.__qualname__}(...) refused it: {exc}") from None

    _CACHE[cls] = rebuild  # before the fields: a dataclass that nests itself
    hints = typing.get_type_hints(cls)
    for field in dataclasses.fields(cls):
        if not field.init:
            continue
        hint = hints.get(field.name, Any)
        part = _scalar_check(hint) or rebuilder(hint, f"{where} (field {field.name!r})")
        required = field.default is dataclasses.MISSING and (
            field.default_factory is dataclasses.MISSING
        )
        fields.append((field.name, part, required))
    return rebuild


def _model(cls: Any) -> Rebuild:
    def rebuild(value: Any, path: str) -> Any:
        try:
            return cls.model_validate(value)
        except ValueError as exc:  # pydantic's ValidationError is a ValueError
            errors = getattr(exc, "errors", None)
            first = errors()[0] if callable(errors) and errors() else None
            if first is None:
                raise RebuildError(path, str(exc)) from None
            loc = ".".join(str(part) for part in first.get("loc", ()))
            field_path = ".".join(p for p in (path, loc) if p)
            raise RebuildError(field_path, str(first.get("msg", exc))) from None

    return rebuild


def _enum(cls: type[enum.Enum]) -> Rebuild:
    def rebuild(value: Any, path: str) -> Any:
        try:
            return cls(value)
        except ValueError:
            raise RebuildError(path, f"{value!r:.60} is not a {cls.__qualname__}") from None

    return rebuild


def _from_string(cls: type, parse: Callable[[str], Any]) -> Rebuild:
    def rebuild(value: Any, path: str) -> Any:
        if isinstance(value, cls):
            return value
        try:
            return parse(str(value))
        except (ValueError, TypeError, InvalidOperation):
            raise RebuildError(path, f"expected {cls.__qualname__}, {_got(value)}") from None

    return rebuild


__all__ = [
    "Rebuild",
    "RebuildError",
    "rebuilder",
    "to_json_value",
]
