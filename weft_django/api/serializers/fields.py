"""Strict input fields of the weft REST API (SPEC §5).

Why stricter than DRF's defaults: the API is the one place where untrusted
input reaches the runtime, and a bad body must be a 400 naming the field,
never a 500. So:

* strings are strings (DRF's ``CharField`` turns ``123`` into ``"123"`` and
  accepts lone surrogates, which the database then refuses);
* durations are finite, non-negative seconds and never booleans;
* every JSON payload (input, signal payload, query args, async results and
  errors) goes through ``weft_django.engine.workflow.payload.normalize`` *here*, so
  NaN, ±Infinity, ``\\u0000``, nesting deeper than 100 levels and
  ``MAX_PAYLOAD_BYTES`` are reported against the field that carried them;
  the client checks again when it writes, so nothing bypasses the limit.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from weft_django.engine.workflow.payload import normalize
from weft_django.errors import PayloadError
from weft_django.inspection.format import iso
from weft_django.inspection.payload_view import shown

#: Upper bound of any duration the API accepts (100 years, in seconds): far
#: beyond any sensible delay, and small enough that ms arithmetic and
#: datetimes never overflow.
MAX_DURATION_SECONDS = 100 * 365.25 * 24 * 3600


class StrictCharField(serializers.CharField):
    """A ``CharField`` that accepts only JSON strings without lone surrogates.

    Whitespace is kept as sent (``trim_whitespace=False``): a workflow id or a
    signal name with a trailing space is a different name, not the same one.
    """

    default_error_messages = {
        "not_a_string": "Must be a string.",
        "surrogate": "Must not contain lone surrogate characters.",
    }

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("trim_whitespace", False)
        if not kwargs.get("allow_blank", False):
            kwargs.setdefault("min_length", 1)  # so the schema says what "blank" refuses
        super().__init__(**kwargs)

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("not_a_string")
        try:
            data.encode("utf-8")
        except UnicodeEncodeError:
            self.fail("surrogate")
        return str(super().to_internal_value(data))


class SecondsField(serializers.FloatField):
    """A duration in seconds: a finite, non-negative number, never a boolean."""

    default_error_messages = {"boolean": "Must be a number of seconds, not a boolean."}

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("min_value", 0)
        kwargs.setdefault("max_value", MAX_DURATION_SECONDS)
        super().__init__(**kwargs)

    def to_internal_value(self, data: Any) -> float:
        if isinstance(data, bool):
            self.fail("boolean")
        return float(super().to_internal_value(data))


class StrictBooleanField(serializers.BooleanField):
    """A JSON ``true`` or ``false`` only (DRF's ``BooleanField`` also takes
    ``"yes"``, ``1``, ``"on"``...): ``force: "false"`` must be a 400, not a
    forced cancel."""

    default_error_messages = {"not_a_boolean": "Must be true or false."}

    def to_internal_value(self, data: Any) -> bool:
        if not isinstance(data, bool):
            self.fail("not_a_boolean")
        return data


@extend_schema_field(OpenApiTypes.ANY)
class JSONPayloadField(serializers.Field):
    """Any JSON value, validated by ``payload.normalize`` as ``what``.

    Not DRF's ``JSONField``: that one re-encodes the value with ``json.dumps``
    at whatever stack depth the view is at, and a deeply nested body parsed
    just under the recursion limit would then raise ``RecursionError`` (a
    500). ``normalize`` refuses anything deeper than 100 levels first.
    """

    def __init__(self, *, what: str, **kwargs: Any) -> None:
        self.what = what
        super().__init__(**kwargs)

    def to_internal_value(self, data: Any) -> Any:
        try:
            return normalize(self.what, data)
        except PayloadError as exc:
            raise serializers.ValidationError(str(exc), code=exc.code) from None

    def to_representation(self, value: Any) -> Any:
        # Decoded only for a user holding ``weft.view_payload`` (``WeftAPIView``
        # decides per request); others get ``{"hidden": true, "size": n}``.
        return shown(value)


@extend_schema_field({"type": "array", "items": {}})
class JSONArgsField(JSONPayloadField):
    """A JSON array of positional arguments (each any JSON value)."""

    default_error_messages = {"not_a_list": "Must be a JSON array."}

    def to_internal_value(self, data: Any) -> Any:
        if not isinstance(data, list):
            self.fail("not_a_list")
        return super().to_internal_value(data)


__all__ = [
    "MAX_DURATION_SECONDS",
    "JSONArgsField",
    "JSONPayloadField",
    "MillisecondsAsISOField",
    "SecondsField",
    "StrictCharField",
]


@extend_schema_field(OpenApiTypes.DATETIME)
class MillisecondsAsISOField(serializers.Field):
    """Engine-clock milliseconds shown as ISO 8601 in UTC (read-only): a person
    reading the API never meets an epoch-millisecond instant under a plain name."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs["read_only"] = True
        super().__init__(**kwargs)

    def to_representation(self, value: Any) -> str | None:
        return iso(value)
