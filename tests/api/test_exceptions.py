"""The exception handler, parser and renderer on their own: every error is JSON with a code."""

from __future__ import annotations

import io
import json
import logging
from typing import Any

import pytest
from django.core.exceptions import DisallowedHost
from django.http import Http404
from rest_framework import exceptions
from rest_framework.test import APIClient

from tests.api.conftest import url
from weft_django.api.exceptions import RequestBodyTooLarge, weft_exception_handler
from weft_django.api.parsers import WeftJSONParser, WeftJSONRenderer
from weft_django.errors import AsyncActivityTokenError, InvalidTransitionError, PayloadError


def handle(exc: Exception) -> Any:
    response = weft_exception_handler(exc, {})
    return response.status_code, response.data


def test_weft_errors_use_their_status_and_as_dict() -> None:
    status, body = handle(InvalidTransitionError("w", "completed", "retry"))
    assert status == 409
    assert body == InvalidTransitionError("w", "completed", "retry").as_dict()
    assert handle(AsyncActivityTokenError("unknown"))[0] == 404
    assert handle(AsyncActivityTokenError("used"))[0] == 409
    status, body = handle(PayloadError("signal payload", "too big"))
    assert status == 400 and body["code"] == "invalid_payload" and body["what"] == "signal payload"


def test_validation_errors_are_field_maps() -> None:
    status, body = handle(exceptions.ValidationError({"name": ["required"]}))
    assert status == 400 and body["code"] == "invalid"
    assert body["errors"] == {"name": ["required"]} and "name: required" in body["message"]
    status, body = handle(exceptions.ValidationError(["whole body wrong"]))
    assert body["errors"] == {"non_field_errors": ["whole body wrong"]}
    status, body = handle(exceptions.ValidationError({"error": {"message": ["blank"]}}))
    assert "error.message: blank" in body["message"]


def test_drf_and_django_exceptions_get_codes() -> None:
    assert handle(exceptions.NotAuthenticated()) == (
        401,
        {"code": "not_authenticated", "message": str(exceptions.NotAuthenticated().detail)},
    )
    assert handle(Http404("gone"))[1]["code"] == "not_found"
    assert handle(exceptions.ParseError("bad"))[1] == {"code": "parse_error", "message": "bad"}
    assert handle(RequestBodyTooLarge())[0] == 413
    status, body = handle(DisallowedHost("evil.example"))
    assert status == 400 and body["code"] == "invalid"
    response = weft_exception_handler(exceptions.Throttled(wait=7), {})
    assert response.status_code == 429 and response["Retry-After"] == "7"
    assert response.data["code"] == "throttled"


def test_an_unexpected_exception_is_a_logged_json_500(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.ERROR, logger="weft_django.api"):
        status, body = handle(RuntimeError("bug"))
    assert status == 500 and body["code"] == "internal_error"
    assert "bug" not in body["message"]  # no internals leak to the client
    assert any(record.exc_info for record in caplog.records)


@pytest.mark.django_db
def test_a_bug_in_a_view_answers_json(api: APIClient, monkeypatch: pytest.MonkeyPatch) -> None:
    from weft_django import client

    def broken(workflow_id: str) -> Any:
        raise RuntimeError("boom")

    monkeypatch.setattr(client, "ownership_status", broken)
    api.raise_request_exception = False
    response = api.get(url("workflows/w/ownership/"))
    assert response.status_code == 500
    assert response["Content-Type"] == "application/json"
    assert response.json()["code"] == "internal_error"


def test_renderer_escapes_what_utf8_cannot_encode() -> None:
    rendered = WeftJSONRenderer().render({"message": "bad \ud800 value", "ok": "é"})
    assert json.loads(rendered) == {"message": "bad \ud800 value", "ok": "é"}
    assert WeftJSONRenderer().render({"ok": "é"}) == '{"ok":"é"}'.encode()


def test_parser_refuses_constants_depth_and_size(settings: Any) -> None:
    parser = WeftJSONParser()

    def parse(raw: bytes, **context: Any) -> Any:
        return parser.parse(io.BytesIO(raw), "application/json", context)

    assert parse(b'{"a": [1, 2.5, "x"]}') == {"a": [1, 2.5, "x"]}
    for raw in (b"NaN", b"[Infinity]", b"[" * 100_000, b"\xff", b'{"a": 1'):
        with pytest.raises(exceptions.ParseError):
            parse(raw)
    with pytest.raises(exceptions.ParseError):
        parse(b"{}", encoding="bz2_codec")
    settings.WEFT = {"MAX_PAYLOAD_BYTES": 1000}
    with pytest.raises(RequestBodyTooLarge):
        parse(b'"' + b"x" * 70_000 + b'"')
