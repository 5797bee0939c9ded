"""The responses every weft operation can answer, added to its OpenAPI entry.

Some statuses come from DRF's machinery, not from the view -- 405 (a method the route does
not serve), 406 (an ``Accept`` the JSON renderer cannot meet), 400 (a query parameter the
view or its paginator refuses), 401/403 (authentication and permission) and, wherever a
body is parsed, 400/413/415 (malformed, over the parser's cap, not JSON). They are derived
from the view at schema time, not written on each view, so the schema equals what the API
returns, whatever the project's ``REST_FRAMEWORK`` settings:

* a refused login is a 401 only when the first authentication class sends
  a ``WWW-Authenticate`` challenge (Basic does; Session does not), else 403;
* with session authentication, DRF's CSRF check of a POST reads the form
  data -- which parses the body -- so even a POST that takes no body can
  answer 400, 413 or 415 for the body it was sent.

The cookie-session security scheme also says that unsafe methods need the
``X-CSRFToken`` header: a client generated from the schema must know.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.authentication import SessionScheme
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.utils import OpenApiResponse
from rest_framework.authentication import SessionAuthentication
from rest_framework.permissions import AllowAny

from .serializers import ErrorSerializer, ValidationErrorSerializer

BODY_METHODS = ("POST", "PUT", "PATCH")


def _error(description: str) -> OpenApiResponse:
    return OpenApiResponse(response=ErrorSerializer, description=description)


ERR_400_QUERY = OpenApiResponse(
    response=ValidationErrorSerializer,
    description="A bad query parameter: code `invalid` with `errors` per parameter.",
)
ERR_401 = _error(
    "Not authenticated (code `not_authenticated` or `authentication_failed`); the "
    "`WWW-Authenticate` header names the scheme to use."
)
ERR_403 = _error(
    "Not permitted by `API_PERMISSION_CLASSES` (code `permission_denied`), a cookie "
    "session without a valid `X-CSRFToken` header on an unsafe method, or -- when the "
    "project's first authentication class sends no challenge, as session authentication "
    "does -- not authenticated (code `not_authenticated`)."
)
ERR_405 = _error("The route does not serve this method (code `method_not_allowed`).")
ERR_406 = _error(
    "The `Accept` header rules out `application/json`, the only media type answered "
    "(code `not_acceptable`)."
)
ERR_400_BODY = OpenApiResponse(
    response=ValidationErrorSerializer,
    description="A body that is not valid JSON (code `parse_error`).",
)
ERR_413 = _error(
    "The request body is larger than the API reads, twice `MAX_PAYLOAD_BYTES` plus "
    "64 KiB (code `request_too_large`)."
)
ERR_415 = _error(
    "The body's `Content-Type` is not `application/json` (code `unsupported_media_type`)."
)


class WeftAutoSchema(AutoSchema):
    """drf-spectacular's schema, plus the statuses DRF itself answers for the view.

    An operation's description is its ``extend_schema(description=...)``,
    never the view class's docstring: those are written for the code's
    readers (reStructuredText, internal references), not for API clients.
    """

    def get_description(self) -> str:  # type: ignore[override]
        return ""

    def _get_response_bodies(self, direction: Any = "response") -> dict[str, Any]:
        responses: dict[str, Any] = super()._get_response_bodies(direction)
        for code, response in self._standard_errors().items():
            if str(code) not in responses:
                responses[str(code)] = self._get_response_for_code(
                    response, str(code), direction=direction
                )
        if not self._challenges():
            responses.pop("401", None)
        return dict(sorted(responses.items()))

    def _standard_errors(self) -> dict[int, OpenApiResponse]:
        errors = {405: ERR_405, 406: ERR_406}
        if any(parameter.get("in") == "query" for parameter in self._get_parameters()):
            errors[400] = ERR_400_QUERY
        if self._checks_permissions():
            errors[403] = ERR_403
            if self._challenges():
                errors[401] = ERR_401
        if self._parses_body():
            errors.setdefault(400, ERR_400_BODY)
            errors[413] = ERR_413
            errors[415] = ERR_415
        return errors

    def _parses_body(self) -> bool:
        if self.method in BODY_METHODS and self.get_request_serializer() is not None:
            return True
        return self.method == "POST" and any(
            isinstance(authenticator, SessionAuthentication)
            for authenticator in self.view.get_authenticators()
        )

    def _checks_permissions(self) -> bool:
        permissions = self.view.get_permissions()
        return bool(self.view.get_authenticators()) or not all(
            isinstance(permission, AllowAny) for permission in permissions
        )

    def _challenges(self) -> bool:
        """DRF answers 401 (not 403) only if the first authenticator sends a challenge."""
        authenticators = self.view.get_authenticators()
        if not authenticators:
            return False
        return bool(authenticators[0].authenticate_header(self.view.request))


class CsrfSessionScheme(SessionScheme):
    """Django's session cookie, with the CSRF rule a client must follow."""

    priority = 1  # over drf-spectacular's own SessionScheme

    def get_security_definition(self, auto_schema: Any) -> dict[str, Any]:
        definition = dict(super().get_security_definition(auto_schema))
        definition["description"] = (
            "Django's session cookie (log in through the admin or your own login view). "
            "Unsafe methods (POST, PUT, PATCH, DELETE) with this cookie must also send "
            "the CSRF token in the `X-CSRFToken` header (the value of the `csrftoken` "
            "cookie); without it the API answers 403. Basic and token authentication "
            "need no CSRF token."
        )
        return definition


__all__ = [
    "ERR_400_BODY",
    "ERR_400_QUERY",
    "ERR_401",
    "ERR_403",
    "ERR_405",
    "ERR_406",
    "ERR_413",
    "ERR_415",
    "CsrfSessionScheme",
    "WeftAutoSchema",
]
