"""Completing and failing an async activity: the token is the credential.

Routes: ``async-activities/complete/`` and ``fail/`` take the token in the
``Weft-Async-Token`` header (preferred) or as ``token`` in the JSON body;
``async-activities/<token>/complete/`` and ``fail/`` take it in the path
(the original form, kept for callers that can only configure a URL).

Why the header is preferred: a URL path is written to every access log on
the way (reverse proxy, load balancer, ``runserver``), and the token is a
bearer credential until it is used; headers are not logged by default, and
keeping the token out of the body keeps the body exactly the result.

Why no authentication and no permission classes: the caller is the outside
system an async activity handed its token to; the token alone authorises
(it is stored hashed, single use). Error answers are logged with a path
token redacted (``api.logging``).

One token per call: the token may be given in more than one place only if
it is the same everywhere; two different tokens are a 400
``async_token_conflict`` (never "the header wins": a caller that sends two
has a bug, and guessing which one it meant could settle the wrong activity);
none at all is a 400 ``async_token_missing``. Nothing is written either way.
"""

from __future__ import annotations

from typing import Any, ClassVar

from drf_spectacular.utils import extend_schema
from rest_framework import exceptions
from rest_framework.permissions import AllowAny, BasePermission
from rest_framework.request import Request
from rest_framework.response import Response

from weft_django import client
from weft_django.api.exceptions import AsyncTokenConflict, AsyncTokenMissing
from weft_django.api.logging import log_token_response
from weft_django.api.schema import (
    ASYNC_TAG,
    ERR_400_TOKEN,
    ERR_413,
    ERR_TOKEN_UNKNOWN,
    ERR_TOKEN_USED,
    TOKEN_HEADER,
    TOKEN_HEADER_PARAM,
    TOKEN_PARAM,
)
from weft_django.api.serializers import (
    AsyncSettledSerializer,
    CompleteAsyncSerializer,
    FailAsyncSerializer,
)
from weft_django.kernel.ids import TOKEN_CHARS, TOKEN_RE
from weft_django.models import AsyncStatus

from .base import WeftAPIView, validated

_TOKEN_RESPONSES: dict[int, Any] = {
    200: AsyncSettledSerializer,
    400: ERR_400_TOKEN,
    404: ERR_TOKEN_UNKNOWN,
    409: ERR_TOKEN_USED,
    413: ERR_413,
}


def header_token(request: Request) -> str | None:
    """The ``Weft-Async-Token`` header, ``None`` when absent; a malformed one is a 400."""
    value = request.headers.get(TOKEN_HEADER)
    if value is None:
        return None
    if not TOKEN_RE.match(value):
        raise exceptions.ValidationError({TOKEN_HEADER: [f"Must match {TOKEN_CHARS}."]})
    return value


def the_token(request: Request, path: str | None, body: str | None) -> str:
    """The one token the call names (path, header, body), or a 400 saying why not."""
    given = {
        where: value
        for where, value in (("path", path), ("header", header_token(request)), ("body", body))
        if value is not None
    }
    if not given:
        raise AsyncTokenMissing(
            f"No async activity token: send it in the {TOKEN_HEADER} header (preferred) "
            'or as "token" in the JSON body.'
        )
    if len(set(given.values())) > 1:
        raise AsyncTokenConflict(
            "Different async activity tokens were sent in the "
            + " and the ".join(given)
            + ": send one token, in one place (the header is preferred)."
        )
    return next(iter(given.values()))


class _AsyncTokenView(WeftAPIView):
    """No authentication, no permission classes: the token authorises itself."""

    authentication_classes: ClassVar[list[type]] = []

    def get_permissions(self) -> list[BasePermission]:
        return [AllowAny()]

    def finalize_response(
        self, request: Request, response: Response, *args: Any, **kwargs: Any
    ) -> Response:
        response = super().finalize_response(request, response, *args, **kwargs)
        log_token_response(request._request, response)
        return response


class _Complete(_AsyncTokenView):
    def post(self, request: Request, token: str | None = None) -> Response:
        data = validated(CompleteAsyncSerializer, request.data)
        client.complete_async_activity(
            the_token(request, token, data.get("token")), data.get("result")
        )
        return Response(AsyncSettledSerializer({"status": AsyncStatus.COMPLETED}).data)


class _Fail(_AsyncTokenView):
    def post(self, request: Request, token: str | None = None) -> Response:
        data = validated(FailAsyncSerializer, request.data)
        client.fail_async_activity(the_token(request, token, data.get("token")), data["error"])
        return Response(AsyncSettledSerializer({"status": AsyncStatus.FAILED}).data)


_COMPLETE = (
    "Records the result; the waiting run resumes. Single use. No login: the token alone "
    "authorises (tokens are stored hashed)."
)
_FAIL = (
    "Records the failure: the workflow sees an ActivityError with this message and "
    "type. Single use. No login: the token alone authorises."
)
_OUT_OF_THE_PATH = (
    " The token goes in the Weft-Async-Token header (preferred) or as `token` in the "
    "body, so it stays out of access logs."
)
_IN_THE_PATH = (
    " The token is in the path here: prefer `async-activities/complete/` (or `fail/`) "
    "with the Weft-Async-Token header, since a path ends up in access logs."
)


class AsyncActivityCompleteView(_Complete):
    """``async-activities/<token>/complete/``."""

    @extend_schema(
        operation_id="weft_async_activities_complete",
        tags=ASYNC_TAG,
        summary="Complete an async activity (token in the path)",
        description=_COMPLETE + _IN_THE_PATH,
        auth=[],
        parameters=[TOKEN_PARAM, TOKEN_HEADER_PARAM],
        request=CompleteAsyncSerializer,
        responses=_TOKEN_RESPONSES,
    )
    def post(self, request: Request, token: str | None = None) -> Response:
        return super().post(request, token)


class AsyncActivityFailView(_Fail):
    """``async-activities/<token>/fail/``."""

    @extend_schema(
        operation_id="weft_async_activities_fail",
        tags=ASYNC_TAG,
        summary="Fail an async activity (token in the path)",
        description=_FAIL + _IN_THE_PATH,
        auth=[],
        parameters=[TOKEN_PARAM, TOKEN_HEADER_PARAM],
        request=FailAsyncSerializer,
        responses=_TOKEN_RESPONSES,
    )
    def post(self, request: Request, token: str | None = None) -> Response:
        return super().post(request, token)


class AsyncActivityCompleteByTokenView(_Complete):
    """``async-activities/complete/``: the token in the header or the body."""

    @extend_schema(
        operation_id="weft_async_activities_complete_by_token",
        tags=ASYNC_TAG,
        summary="Complete an async activity",
        description=_COMPLETE + _OUT_OF_THE_PATH,
        auth=[],
        parameters=[TOKEN_HEADER_PARAM],
        request=CompleteAsyncSerializer,
        responses=_TOKEN_RESPONSES,
    )
    def post(self, request: Request, token: str | None = None) -> Response:
        return super().post(request, None)


class AsyncActivityFailByTokenView(_Fail):
    """``async-activities/fail/``: the token in the header or the body."""

    @extend_schema(
        operation_id="weft_async_activities_fail_by_token",
        tags=ASYNC_TAG,
        summary="Fail an async activity",
        description=_FAIL + _OUT_OF_THE_PATH,
        auth=[],
        parameters=[TOKEN_HEADER_PARAM],
        request=FailAsyncSerializer,
        responses=_TOKEN_RESPONSES,
    )
    def post(self, request: Request, token: str | None = None) -> Response:
        return super().post(request, None)


__all__ = [
    "AsyncActivityCompleteByTokenView",
    "AsyncActivityCompleteView",
    "AsyncActivityFailByTokenView",
    "AsyncActivityFailView",
    "header_token",
    "the_token",
]
