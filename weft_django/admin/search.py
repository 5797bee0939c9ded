"""Exact-id search for the changelists whose rows an action may act on.

Why exact by default: Django's search is a substring match, so searching
``sw-18`` lists ``sw-189`` too, and "select all, cancel" then cancels a run
nobody meant. Here each whitespace- or comma-separated term must equal a
search field; a term ending in ``*`` matches by prefix (``sw-18*``), which
is the one way to ask for more than the ids typed. ``*`` is not in the
workflow-id grammar (``weft_django.kernel.ids``), so the suffix is never part of an id.
Terms are OR-ed: pasting several ids lists each of them.
"""

from __future__ import annotations

import re
from typing import Any

from django.db.models import Q, QuerySet
from django.http import HttpRequest

PREFIX = "*"
EXACT_SEARCH_HELP = (
    "exact match; several ids separated by spaces; end a term with * to match by prefix "
    "(sw-18* finds sw-18, sw-180, sw-189)"
)


def search_terms(search_term: str) -> list[tuple[str, bool]]:
    """``(text, is_prefix)`` per term; empty terms (a lone ``*``) are dropped."""
    terms = []
    for raw in re.split(r"[\s,]+", search_term.strip()):
        prefix = raw.endswith(PREFIX)
        text = raw.rstrip(PREFIX)
        if text:
            terms.append((text, prefix))
    return terms


def exact_or_prefix(fields: tuple[str, ...], search_term: str) -> Q | None:
    """The filter for ``search_term`` over ``fields``, or ``None`` for no filter."""
    terms = search_terms(search_term)
    if not terms:
        return None
    query = Q(pk__in=[])
    for text, prefix in terms:
        lookup = "startswith" if prefix else "exact"
        for name in fields:
            query |= Q(**{f"{name}__{lookup}": text})
    return query


class ExactSearchMixin:
    """``get_search_results`` by exact id (prefix with a trailing ``*``).

    Reads the ``ModelAdmin``'s ``search_fields`` as plain field paths; never
    reports duplicates (no weft search field crosses a to-many relation). Say
    so to the user with ``EXACT_SEARCH_HELP`` in ``search_help_text``.
    """

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[Any], search_term: str
    ) -> tuple[QuerySet[Any], bool]:
        fields = tuple(getattr(self, "search_fields", ()) or ())
        query = exact_or_prefix(fields, search_term)
        if query is None:
            return queryset, False
        return queryset.filter(query), False


__all__ = ["EXACT_SEARCH_HELP", "PREFIX", "ExactSearchMixin", "exact_or_prefix", "search_terms"]
