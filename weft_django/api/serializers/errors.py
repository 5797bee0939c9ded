"""The error bodies of the weft API, with every field typed.

Why generated from ``weft_django.errors``: an error body is
``WeftError.as_dict()`` -- ``code``, ``message`` and the error's own
fields -- so the published component lists exactly the fields some error
class carries, with the type its annotation declares. A field added to an
error class appears in the schema without anyone remembering to add it
here, and a client generated from the schema gets typed attributes rather
than a free-form object.
"""

from __future__ import annotations

import types
import typing
from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from weft_django.errors import ERROR_CLASSES


def _split_none(annotation: Any) -> tuple[Any, bool]:
    """``str | None`` -> ``(str, True)``; a ``Literal`` is its values' type."""
    nullable = False
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        args = typing.get_args(annotation)
        nullable = type(None) in args
        rest = [arg for arg in args if arg is not type(None)]
        annotation = rest[0] if len(rest) == 1 else Any
    if typing.get_origin(annotation) is typing.Literal:
        values = {type(value) for value in typing.get_args(annotation)}
        annotation = values.pop() if len(values) == 1 else Any
    return annotation, nullable


def _field_for(annotation: Any, nullable: bool = False) -> serializers.Field:
    """A serializer field of ``annotation``'s type, optional (not every error has it)."""
    origin = typing.get_origin(annotation)
    options: dict[str, Any] = {"required": False, "allow_null": nullable}
    if annotation is str:
        return serializers.CharField(**options)
    if annotation is int:
        return serializers.IntegerField(**options)
    if annotation is bool:
        return serializers.BooleanField(**options)
    if origin in (list, tuple):  # ``tuple[str, ...]`` is a JSON array too
        item = (typing.get_args(annotation) or (Any,))[0]
        return serializers.ListField(child=_field_for(*_split_none(item)), **options)
    if origin is dict:
        return serializers.DictField(child=serializers.JSONField(), **options)
    return serializers.JSONField(**options)


def _error_fields() -> dict[str, serializers.Field]:
    """``as_dict()`` key -> field, over every error class.

    Two classes may give one key different types: nullable if either is,
    any JSON value if the types themselves differ.
    """
    found: dict[str, tuple[Any, bool]] = {}
    for cls in ERROR_CLASSES:
        hints = typing.get_type_hints(cls)
        for name in cls._fields:
            key = cls._dict_keys.get(name, name)
            annotation, nullable = _split_none(hints[name])
            if key in found:
                seen, seen_nullable = found[key]
                annotation = annotation if annotation == seen else Any
                nullable = nullable or seen_nullable
            found[key] = (annotation, nullable)
    return {key: _field_for(*found[key]) for key in sorted(found)}


ErrorSerializer = type(
    "ErrorSerializer",
    (serializers.Serializer,),
    {
        "__doc__": "Every error: a stable `code`, a human-readable `message`, and the "
        "fields of that error (which ones depends on `code`).",
        "__module__": __name__,
        "code": serializers.CharField(help_text="Stable, machine-readable error code."),
        "message": serializers.CharField(help_text="What went wrong, in a sentence."),
        **_error_fields(),
    },
)


@extend_schema_field(
    {
        "type": "object",
        "additionalProperties": {
            "anyOf": [
                {"type": "array", "items": {}},
                {"type": "object"},
            ]
        },
    }
)
class FieldErrorsField(serializers.DictField):
    """Field name -> list of messages, or an object for a nested field."""


class ValidationErrorSerializer(ErrorSerializer):  # type: ignore[valid-type,misc]
    """A 400: code `invalid` with `errors` per field, or another code without."""

    errors = FieldErrorsField(
        required=False,
        help_text='With code "invalid": field name -> list of messages (an object for '
        'nested fields). Absent for "parse_error" and "invalid_payload".',
    )


__all__ = ["ErrorSerializer", "FieldErrorsField", "ValidationErrorSerializer"]
