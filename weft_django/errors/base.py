"""The machinery every public error shares: declared fields as the constructor,
a message naming them, ``as_dict()`` for the API, and pickling by fields.

Invariant: an error rebuilds from its fields alone (``__reduce__``), so it
survives a trip between processes (Celery) with every value it names.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar, dataclass_transform


def _rebuild_error(cls: type[WeftError], fields: dict[str, Any]) -> WeftError:
    return cls(**fields)


_E = TypeVar("_E", bound="WeftError")


@dataclass_transform(eq_default=False)
def error_class(cls: type[_E]) -> type[_E]:
    """Make ``cls``'s annotated fields its constructor (a dataclass that keeps
    exception identity, ``repr`` and hashing) and record them as ``_fields``."""
    made = dataclass(eq=False, repr=False)(cls)
    made._fields = tuple(f.name for f in dataclasses.fields(made))  # type: ignore[arg-type]
    return made


class WeftError(Exception):
    """Base class of every weft-django error (never raised itself).

    A subclass declares its fields as annotations and its sentence in
    ``_message()``; ``@error_class`` generates the constructor.
    """

    code: ClassVar[str] = "weft_error"
    http_status: ClassVar[int] = 500
    _fields: ClassVar[tuple[str, ...]] = ()
    # as_dict() key for a field whose name clashes with "code" or "message".
    _dict_keys: ClassVar[dict[str, str]] = {}

    def __post_init__(self) -> None:
        super().__init__(self._message())

    def _message(self) -> str:
        raise NotImplementedError

    def fields(self) -> dict[str, Any]:
        """The constructor fields by name."""
        return {name: getattr(self, name) for name in self._fields}

    def as_dict(self) -> dict[str, Any]:
        """``{"code", "message", **fields}`` -- the API's error body."""
        body: dict[str, Any] = {"code": self.code, "message": str(self)}
        for name, value in self.fields().items():
            body[self._dict_keys.get(name, name)] = value
        return body

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild_error, (type(self), self.fields()))


def holder_text(held_by: str | None) -> str:
    """How a message names a holder: quoted, or as unknown when ``None``."""
    return f'"{held_by}"' if held_by is not None else "an unknown or vanished holder"


__all__ = ["WeftError", "holder_text"]
