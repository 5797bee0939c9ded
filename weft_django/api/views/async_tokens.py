"""``async-activities/<token>/complete/`` and ``fail/``: the token is the credential.

Why no authentication and no permission classes: the caller is the outside
system an async activity handed its token to; the token alone authorises
(it is stored hashed, single use). Error answers are logged with the token
redacted (``api.logging``).
"""

from __future__ import annotations

from typing import Any, ClassVar

from drf_spectacular.utils import extend_schema
from rest_framework.permissions import AllowAny, BasePermission
from rest_framework.request import Request
from rest_framework.response import Response

from weft_django.api.logging import log_token_response
from weft_django.api.schema import (
    ASYNC_TAG,
    ERR_400,
    ERR_413,
    ERR_TOKEN_UNKNOWN,
    ERR_TOKEN_USED,
    TOKEN_PARAM,
)
from weft_django.api.serializers import (
    AsyncSettledSerializer,
    CompleteAsyncSerializer,
    FailAsyncSerializer,
)
from weft_django.engine import client
from weft_django.models import AsyncStatus

from .base import WeftAPIView, validated

_TOKEN_RESPONSES: dict[int, Any] = {
    200: AsyncSettledSerializer,
    400: ERR_400,
    404: ERR_TOKEN_UNKNOWN,
    409: ERR_TOKEN_USED,
    413: ERR_413,
}


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


class AsyncActivityCompleteView(_AsyncTokenView):
    """``async-activities/<token>/complete/``."""

    @extend_schema(
        operation_id="weft_async_activities_complete",
        tags=ASYNC_TAG,
        summary="Complete an async activity",
        description="Records the result; the waiting run resumes. Single use. No login: "
        "the token alone authorises (tokens are stored hashed).",
        auth=[],
        parameters=[TOKEN_PARAM],
        request=CompleteAsyncSerializer,
        responses=_TOKEN_RESPONSES,
    )
    def post(self, request: Request, token: str) -> Response:
        data = validated(CompleteAsyncSerializer, request.data)
        client.complete_async_activity(token, data.get("result"))
        return Response(AsyncSettledSerializer({"status": AsyncStatus.COMPLETED}).data)


class AsyncActivityFailView(_AsyncTokenView):
    """``async-activities/<token>/fail/``."""

    @extend_schema(
        operation_id="weft_async_activities_fail",
        tags=ASYNC_TAG,
        summary="Fail an async activity",
        description="Records the failure: the workflow sees an ActivityError with this "
        "message and type. Single use. No login: the token alone authorises.",
        auth=[],
        parameters=[TOKEN_PARAM],
        request=FailAsyncSerializer,
        responses=_TOKEN_RESPONSES,
    )
    def post(self, request: Request, token: str) -> Response:
        data = validated(FailAsyncSerializer, request.data)
        client.fail_async_activity(token, data["error"])
        return Response(AsyncSettledSerializer({"status": AsyncStatus.FAILED}).data)


__all__ = ["AsyncActivityCompleteView", "AsyncActivityFailView"]
