"""``PayloadField``: a JSON column holding a workflow payload.

Invariant protected: every write of a payload column goes through
``codecs.stored.encode_payload`` (``get_db_prep_save`` is the one place
Django and ``weft_django.db``'s hand-written statements turn a saved value
into a parameter) and every read through ``decode_payload``
(``from_db_value``), so the configured codecs and blob storage apply to
every payload kind alike. The column is a plain ``JSONField`` in the
migrations (``deconstruct``): what changes is the value, not the schema.
"""

from __future__ import annotations

from typing import Any

from django.db import models
from django.db.models import expressions

from weft_django.codecs.protocol import PayloadContext
from weft_django.codecs.stored import decode_payload, encode_payload


class PayloadField(models.JSONField):
    """A ``JSONField`` whose stored value passes the payload codecs."""

    def contribute_to_class(self, cls: Any, name: str, *args: Any, **kwargs: Any) -> None:
        super().contribute_to_class(cls, name, *args, **kwargs)
        self.payload_context = PayloadContext(cls._meta.label, name)

    def deconstruct(self) -> Any:
        name, _path, args, kwargs = super().deconstruct()
        return name, "django.db.models.JSONField", args, kwargs

    def get_db_prep_save(self, value: Any, connection: Any) -> Any:
        if value is None or (hasattr(value, "as_sql") and not isinstance(value, expressions.Value)):
            return super().get_db_prep_save(value, connection)
        return super().get_db_prep_save(encode_payload(value, self.payload_context), connection)

    def from_db_value(self, value: Any, expression: Any, connection: Any) -> Any:
        decoded = super().from_db_value(value, expression, connection)
        if expression is not None and getattr(expression, "target", self) is not self:
            return decoded
        return decode_payload(decoded, self.payload_context)


__all__ = ["PayloadField"]
