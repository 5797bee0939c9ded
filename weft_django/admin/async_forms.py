"""The forms staff fill in to complete or fail an async activity from the admin.

Why a form of its own: the value typed here is what the waiting workflow
resumes with, so it is checked as the API checks a request body -- JSON,
within ``MAX_PAYLOAD_BYTES`` (``engine.payload.normalize``) -- and a bad
value is refused with an error that quotes it, before anything is written.
"""

from __future__ import annotations

import json
from typing import Any

from django import forms
from django.core.exceptions import ValidationError

from weft_django.engine.workflow.payload import MAX_DEPTH, normalize
from weft_django.errors import PayloadError

QUOTE_LIMIT = 80
"""Characters of a bad value an error message quotes."""


def _quoted(text: str) -> str:
    return repr(text if len(text) <= QUOTE_LIMIT else text[: QUOTE_LIMIT - 1] + "…")


def parse_json(field: str, what: str, text: str) -> Any:
    """``text`` as JSON (blank is ``null``), checked like an API payload."""
    if not text.strip():
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValidationError(
            f"{field} {_quoted(text)} is not JSON: {exc.msg} (line {exc.lineno}, "
            f"column {exc.colno})."
        ) from None
    except RecursionError:  # "[[[[..." deeper than the decoder's stack
        raise ValidationError(
            f"{field} {_quoted(text)} nests deeper than {MAX_DEPTH} levels."
        ) from None
    try:
        return normalize(what, value)
    except PayloadError as exc:
        raise ValidationError(f"{field} {_quoted(text)}: {exc}") from None


class _ActionForm(forms.Form):
    """The hidden fields the admin's action machinery reposts."""

    action = forms.CharField(widget=forms.HiddenInput)
    post = forms.CharField(widget=forms.HiddenInput, initial="yes")


class CompleteAsyncForm(_ActionForm):
    result = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 6, "cols": 80}),
        help_text="JSON the workflow resumes with (the value ctx.async_activity returns); "
        "empty means null.",
    )

    def clean_result(self) -> Any:
        return parse_json("result", "async activity result", self.cleaned_data.get("result", ""))


class FailAsyncForm(_ActionForm):
    message = forms.CharField(
        max_length=2000,
        widget=forms.TextInput(attrs={"size": 80}),
        help_text="The ActivityError message the workflow sees.",
    )
    type = forms.RegexField(
        regex=r"^[A-Za-z_][A-Za-z0-9_.]{0,199}$",
        required=False,
        initial="AsyncActivityFailed",
        help_text="The ActivityError's error_type (a class-like name); empty means "
        "AsyncActivityFailed.",
        error_messages={"invalid": "type %(value)r must look like a class name ([A-Za-z_.])."},
    )
    details = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 4, "cols": 80}),
        help_text="Optional JSON for the error's details.",
    )

    def clean_details(self) -> Any:
        text = self.cleaned_data.get("details", "")
        return parse_json("details", "async activity error details", text)

    def error_record(self) -> dict[str, Any]:
        """What ``client.fail_async_activity_by_hash`` records."""
        data = self.cleaned_data
        record: dict[str, Any] = {
            "message": data["message"],
            "type": data.get("type") or "AsyncActivityFailed",
        }
        if data.get("details") is not None:
            record["details"] = data["details"]
        return record


__all__ = ["CompleteAsyncForm", "FailAsyncForm", "parse_json"]
