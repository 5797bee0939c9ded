"""OpenAPI pieces shared by the views: tags, error responses, parameters.

Every endpoint documents its error bodies (400 with ``errors`` per field, 403, 404, 409,
413) and the ``run_id`` and ``token`` parameters from these definitions, so the published
schema describes them one way.
"""

from __future__ import annotations

from typing import Any, Final

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse

from weft_django.kernel.ids import TOKEN_RE

from .openapi import ERR_403, ERR_413
from .serializers import ErrorSerializer, ValidationErrorSerializer

WORKFLOW_TAG: Final = ["workflows"]
OWNERSHIP_TAG: Final = ["ownership"]
ASYNC_TAG: Final = ["async-activities"]


def error(description: str, serializer: Any = ErrorSerializer) -> OpenApiResponse:
    return OpenApiResponse(response=serializer, description=description)


ERR_400: Final = error(
    "Bad body or query: code `invalid` with `errors` per field; `parse_error` for "
    "malformed JSON; `invalid_payload` for a payload over `MAX_PAYLOAD_BYTES`.",
    ValidationErrorSerializer,
)
ERR_400_TOKEN: Final = error(
    "Bad body, header or token: code `invalid` with `errors` per field (a malformed "
    "token in the body or the `Weft-Async-Token` header); `async_token_missing` when no "
    "token was sent; `async_token_conflict` when two different tokens were sent (path, "
    "header, body); `parse_error` for malformed JSON; `invalid_payload` for a payload "
    "over `MAX_PAYLOAD_BYTES`.",
    ValidationErrorSerializer,
)
#: 401 is added by ``WeftAutoSchema`` only where the project's first
#: authentication class sends a challenge (DRF answers 403 otherwise).
ERR_AUTH: Final = {403: ERR_403}
ERR_404: Final = error("No such workflow (code workflow_not_found) or run.")
ERR_PAGE: Final = error("A page past the last one (code not_found).")
ERR_409: Final = error(
    "The action does not fit the run's status (code invalid_transition) or a live run "
    "already exists (workflow_already_running, idempotency_conflict)."
)
ERR_TOKEN_UNKNOWN: Final = error("Unknown token (code async_activity_token, kind unknown).")
ERR_TOKEN_USED: Final = error("Token already used (code async_activity_token, kind used).")

RUN_ID_PARAM: Final = OpenApiParameter(
    "run_id",
    OpenApiTypes.UUID,
    OpenApiParameter.QUERY,
    description="An older run of this workflow id (default: the latest run).",
)

TOKEN_PARAM: Final = OpenApiParameter(
    "token",
    OpenApiTypes.STR,
    OpenApiParameter.PATH,
    description="The async activity's token, as handed to the activity. It alone "
    "authorises this call (no login); unknown → 404, already used → 409.",
    pattern=TOKEN_RE.pattern,
)


#: The request header that carries an async activity's token (the preferred place:
#: unlike the path, a header is not written to access logs).
TOKEN_HEADER: Final = "Weft-Async-Token"

TOKEN_HEADER_PARAM: Final = OpenApiParameter(
    TOKEN_HEADER,
    OpenApiTypes.STR,
    OpenApiParameter.HEADER,
    required=False,
    description="The async activity's token (preferred: a header stays out of access "
    "logs, where a URL path does not). Or send it as `token` in the body. Two different "
    "tokens → 400 async_token_conflict; none → 400 async_token_missing.",
    pattern=TOKEN_RE.pattern,
)


def action_responses(ok: Any, status: int = 200) -> dict[int, Any]:
    """The responses of a ``POST workflows/<id>/<action>/``."""
    return {status: ok, 400: ERR_400, **ERR_AUTH, 404: ERR_404, 409: ERR_409, 413: ERR_413}


__all__ = [
    "ASYNC_TAG",
    "ERR_400",
    "ERR_400_TOKEN",
    "ERR_404",
    "ERR_409",
    "ERR_413",
    "ERR_AUTH",
    "ERR_PAGE",
    "ERR_TOKEN_UNKNOWN",
    "ERR_TOKEN_USED",
    "OWNERSHIP_TAG",
    "RUN_ID_PARAM",
    "TOKEN_HEADER",
    "TOKEN_HEADER_PARAM",
    "TOKEN_PARAM",
    "WORKFLOW_TAG",
    "action_responses",
    "error",
]
