"""Request bodies of the async-activity endpoints (``POST async-activities/.../complete/``
and ``.../fail/``, SPEC §5): the result or error that settles an async activity, and the
token when neither the path nor the ``Weft-Async-Token`` header carries it.
"""

from __future__ import annotations

from typing import Any

from django.core.validators import RegexValidator
from rest_framework import serializers

from weft_django.engine.workflow.payload import normalize
from weft_django.errors import PayloadError
from weft_django.kernel.ids import TOKEN_CHARS, TOKEN_RE

from .fields import JSONPayloadField, StrictCharField


def _token_field() -> StrictCharField:
    return StrictCharField(
        required=False,
        max_length=512,
        validators=[RegexValidator(TOKEN_RE, message=f"Must match {TOKEN_CHARS}.", code="invalid")],
        help_text="The token, when neither the path nor the Weft-Async-Token header carries "
        "it. Prefer the header: a path ends up in access logs.",
    )


class CompleteAsyncSerializer(serializers.Serializer):
    """`POST async-activities/complete/` (or `<token>/complete/`)."""

    result = JSONPayloadField(
        what="async activity result", required=False, allow_null=True, default=None
    )
    token = _token_field()


class AsyncErrorSerializer(serializers.Serializer):
    """The `error` object of `POST async-activities/<token>/fail/`."""

    message = StrictCharField(allow_blank=True)
    type = StrictCharField(required=False, allow_null=True, allow_blank=True, max_length=200)
    details = JSONPayloadField(what="async activity error details", required=False, allow_null=True)


class FailAsyncSerializer(serializers.Serializer):
    """`POST async-activities/fail/` (or `<token>/fail/`)."""

    error = AsyncErrorSerializer()
    token = _token_field()

    def validate_error(self, value: dict[str, Any]) -> dict[str, Any]:
        # The parts passed; the whole record must fit MAX_PAYLOAD_BYTES too.
        try:
            normalize("async activity error", value)
        except PayloadError as exc:
            raise serializers.ValidationError(str(exc), code=exc.code) from None
        return value


__all__ = ["AsyncErrorSerializer", "CompleteAsyncSerializer", "FailAsyncSerializer"]
