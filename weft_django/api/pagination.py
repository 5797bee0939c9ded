"""Pagination for every API list that can grow (SPEC §5).

Why a page-number paginator with strict parameters: journals, claim events,
claims and engines grow without bound, so no list endpoint may return
everything at once. DRF's stock ``PageNumberPagination`` answers a
malformed ``?page=abc`` with a 404 and silently ignores a malformed
``?page_size``; a client that sent a bad parameter should be told so, with
a 400 naming the field, exactly like a bad body (an empty value means "not
given", as for every query parameter of the API). A page past the end
stays a 404 (``code: "not_found"``), as DRF clients expect.
"""

from __future__ import annotations

from typing import Any

from django.core.paginator import InvalidPage
from rest_framework import serializers
from rest_framework.exceptions import NotFound
from rest_framework.pagination import PageNumberPagination
from rest_framework.request import Request
from rest_framework.response import Response

from weft_django.db.counting import COUNT_CAP, BoundedCountPaginator

DEFAULT_PAGE_SIZE = 50
MAX_PAGE_SIZE = 500


def query_params(request: Request) -> dict[str, str]:
    """The query parameters as a plain dict (last value wins), empty ones dropped.

    A plain dict because DRF reads a QueryDict like an HTML form (a missing
    boolean would be False); empty values dropped because ``?name=`` is what
    forms and API explorers send for "no filter".
    """
    return {key: value for key, value in request.query_params.items() if value != ""}


class _PageParams(serializers.Serializer):
    """The two pagination query parameters, validated like any other input."""

    page = serializers.IntegerField(required=False, min_value=1, max_value=2**31 - 1)
    page_size = serializers.IntegerField(required=False, min_value=1, max_value=MAX_PAGE_SIZE)


class WeftPagination(PageNumberPagination):
    """``?page=`` (1-based) and ``?page_size=`` (1 to 500, default 50).

    ``count`` is exact up to ``COUNT_CAP`` matches and PostgreSQL's estimate
    above (``db.counting``: an exact count read every match on each page);
    ``count_exact`` says which."""

    django_paginator_class = BoundedCountPaginator
    page_size = DEFAULT_PAGE_SIZE
    page_size_query_param = "page_size"
    max_page_size = MAX_PAGE_SIZE

    def paginate_queryset(self, queryset: Any, request: Request, view: Any = None) -> list[Any]:
        params = _PageParams(data=query_params(request))
        params.is_valid(raise_exception=True)
        size = params.validated_data.get("page_size", self.page_size)
        number = params.validated_data.get("page", 1)
        paginator = self.django_paginator_class(queryset, size)
        try:
            self.page = paginator.page(number)
        except InvalidPage:
            raise NotFound(f"Page {number} is past the last page.") from None
        self.request = request
        return list(self.page)

    def get_paginated_response(self, data: Any) -> Response:
        response = super().get_paginated_response(data)
        response.data["count_exact"] = bool(getattr(self.page.paginator, "count_exact", True))
        return response

    def get_paginated_response_schema(self, schema: dict[str, Any]) -> dict[str, Any]:
        described = super().get_paginated_response_schema(schema)
        described["properties"]["count_exact"] = {
            "type": "boolean",
            "description": f"False when `count` is an estimate (more than {COUNT_CAP} matches).",
        }
        return described

    def get_schema_operation_parameters(self, view: Any) -> list[dict[str, Any]]:
        return [
            {
                "name": self.page_query_param,
                "required": False,
                "in": "query",
                "description": "1-based page number (a page past the last one is a 404).",
                "allowEmptyValue": True,
                "schema": {"type": "integer", "minimum": 1, "maximum": 2**31 - 1},
            },
            {
                "name": self.page_size_query_param,
                "required": False,
                "in": "query",
                "description": f"Results per page (default {DEFAULT_PAGE_SIZE}).",
                "allowEmptyValue": True,
                "schema": {"type": "integer", "minimum": 1, "maximum": MAX_PAGE_SIZE},
            },
        ]
