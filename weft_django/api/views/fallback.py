"""The catch-all under the API prefix: a JSON 404 instead of Django's HTML page."""

from __future__ import annotations

from django.http import HttpRequest, JsonResponse
from django.urls import Resolver404, resolve
from django.views.decorators.csrf import csrf_exempt

from weft_django.api.logging import TOKEN_IN_PATH, log_token_response


@csrf_exempt
def not_found(request: HttpRequest) -> JsonResponse:
    """JSON 404 for a path no route matches (a plain view: not in the schema).

    Reached for ids outside the workflow id grammar, unknown endpoints and a
    missing trailing slash (the catch-all resolves, so ``APPEND_SLASH`` does
    not redirect; the message says what to add instead).
    """
    message = f"No weft API endpoint at {request.path!r}."
    if not request.path.endswith("/"):
        try:
            match = resolve(request.path_info + "/", getattr(request, "urlconf", None))
        except Resolver404:
            match = None
        if match is not None and match.url_name != "not-found":
            message += f" Did you mean {request.path + '/'!r}? (Paths end with a slash.)"
    response = JsonResponse({"code": "not_found", "message": message}, status=404)
    if TOKEN_IN_PATH.search(request.path):
        # ``…/<token>/complete`` without its slash lands here: keep a valid token
        # out of the log (the caller, who sent it, still sees the path).
        log_token_response(request, response)
    return response


__all__ = ["not_found"]
