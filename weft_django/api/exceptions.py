"""Every API error is JSON with a stable ``code`` (SPEC §5).

Why a handler of our own rather than DRF's: DRF answers with ``{"detail":
...}`` or a bare field map, and lets any other exception become Django's
HTML 500 page. Clients of a workflow API branch on codes, so:

* a ``WeftError`` becomes ``exc.as_dict()`` (``{"code", "message",
  **fields}``) with ``exc.http_status`` -- the contract of
  ``weft_django.errors``;
* a validation error becomes 400 ``{"code": "invalid", "message",
  "errors": {field: [...]}}``;
* Django's ``RequestDataTooBig`` (a body over ``DATA_UPLOAD_MAX_MEMORY_SIZE``)
  is a 413 ``request_too_large``, as the API's own cap answers; any other
  ``SuspiciousOperation`` (a disallowed ``Host`` met while building a
  pagination link) is a 400, as Django itself answers it;
* any other DRF exception (401, 403, 404, 405, 406, 415, 429, malformed
  JSON, a body over the size cap) becomes ``{"code": <DRF's code>,
  "message"}`` with its status;
* anything else is a bug: it is logged, sent through Django's
  ``got_request_exception`` (so error trackers and the test client see it)
  and answered 500 ``{"code": "internal_error"}`` -- still JSON.

The views install this handler themselves (``get_exception_handler``), so
a project's own ``REST_FRAMEWORK["EXCEPTION_HANDLER"]`` is left alone.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import RequestDataTooBig, SuspiciousOperation
from django.core.signals import got_request_exception
from django.http import Http404
from rest_framework import exceptions
from rest_framework.response import Response
from rest_framework.views import set_rollback

from weft_django.errors import WeftError

logger = logging.getLogger("weft_django.api")


class RequestBodyTooLarge(exceptions.APIException):
    """The raw request body is larger than the API reads at all."""

    status_code = 413
    default_code = "request_too_large"
    default_detail = "The request body is too large."


class AsyncTokenMissing(exceptions.APIException):
    """An async-activity call named no token (not in the path, header or body)."""

    status_code = 400
    default_code = "async_token_missing"
    default_detail = "No async activity token: send it in the Weft-Async-Token header."


class AsyncTokenConflict(exceptions.APIException):
    """An async-activity call named two different tokens (path, header, body)."""

    status_code = 400
    default_code = "async_token_conflict"
    default_detail = "Two different async activity tokens were sent."


class QueryFailed(exceptions.APIException):
    """The query handler (or the replay feeding it) raised."""

    status_code = 400
    default_code = "query_failed"
    default_detail = "The query could not be answered."


def _code_of(exc: exceptions.APIException) -> str:
    codes = exc.get_codes()
    if isinstance(codes, str):
        return codes
    return str(exc.default_code)


def _flatten(errors: Any, prefix: str = "") -> list[str]:
    """``{"a": ["x"], "b": {"c": ["y"]}}`` -> ``["a: x", "b.c: y"]`` for the message."""
    if isinstance(errors, Mapping):
        out: list[str] = []
        for key, value in errors.items():
            out.extend(_flatten(value, f"{prefix}.{key}" if prefix else str(key)))
        return out
    if isinstance(errors, list):
        return [line for item in errors for line in _flatten(item, prefix)]
    return [f"{prefix}: {errors}" if prefix else str(errors)]


def validation_body(exc: exceptions.ValidationError) -> dict[str, Any]:
    """The 400 body of a validation error: ``errors`` is always a field map."""
    detail = exc.detail
    errors = detail if isinstance(detail, Mapping) else {"non_field_errors": detail}
    lines = _flatten(errors)
    message = "Invalid request: " + "; ".join(lines[:5]) + (" ..." if len(lines) > 5 else "")
    return {"code": "invalid", "message": message, "errors": errors}


def weft_exception_handler(exc: Exception, context: dict[str, Any]) -> Response:
    """DRF exception handler of the weft API (see the module docstring)."""
    if isinstance(exc, WeftError):
        set_rollback()
        return Response(exc.as_dict(), status=exc.http_status)
    if isinstance(exc, Http404):
        exc = exceptions.NotFound(*exc.args)
    elif isinstance(exc, DjangoPermissionDenied):
        exc = exceptions.PermissionDenied(*exc.args)
    elif isinstance(exc, RequestDataTooBig):  # over DATA_UPLOAD_MAX_MEMORY_SIZE: too large
        exc = RequestBodyTooLarge(str(exc) or RequestBodyTooLarge.default_detail)
    elif isinstance(exc, SuspiciousOperation):  # e.g. DisallowedHost while building a link
        exc = exceptions.ValidationError({"non_field_errors": [str(exc)]}, code="bad_request")
    if isinstance(exc, exceptions.ValidationError):
        set_rollback()
        return Response(validation_body(exc), status=400)
    if isinstance(exc, exceptions.APIException):
        headers: dict[str, str] = {}
        if getattr(exc, "auth_header", None):
            headers["WWW-Authenticate"] = str(getattr(exc, "auth_header", ""))
        if getattr(exc, "wait", None):
            headers["Retry-After"] = f"{int(exc.wait)}"
        detail = exc.detail
        message = "; ".join(_flatten(detail)) if isinstance(detail, list | dict) else str(detail)
        set_rollback()
        return Response(
            {"code": _code_of(exc), "message": message}, status=exc.status_code, headers=headers
        )
    request = context.get("request")
    logger.error("Unhandled error in the weft API", exc_info=exc)
    got_request_exception.send(sender=None, request=getattr(request, "_request", None))
    set_rollback()
    return Response(
        {"code": "internal_error", "message": "Internal error; it has been logged."}, status=500
    )
