"""What every weft ModelAdmin shares: the database alias, read-only mixins,
formatting helpers and the actor an admin action is recorded under.

Why read-only: every row belongs to the fenced claim protocol or to a run an
engine may be driving right now. A plain admin "save" would write stale
values behind the engine's back, unfenced, and a "delete" would skip the
claim rotation that stops the owner. So no model can be added, changed or
deleted through a form; the only writes are the actions, through ``client``.
"""

from __future__ import annotations

import json
from typing import Any

from django.contrib import admin
from django.contrib.admin import helpers
from django.contrib.admin.utils import quote, unquote
from django.contrib.admin.views.main import ERROR_FLAG
from django.core.exceptions import ValidationError
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import NoReverseMatch, reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString, mark_safe

from weft_django.conf import get_settings
from weft_django.inspection.payload_view import may_view_payloads, shown, viewing


def json_text(value: Any, limit: int | None = None) -> str:
    """``value`` as JSON text; indented, or on one line cut at ``limit`` characters."""
    text = json.dumps(value, indent=None if limit else 2, sort_keys=True, default=str)
    if limit is not None and len(text) > limit:
        return text[: limit - 1] + "…"
    return text


def pre_json(value: Any) -> SafeString:
    if value is None:
        return mark_safe("-")
    return format_html('<pre style="margin:0;white-space:pre-wrap">{}</pre>', json_text(value))


def payload_pre(value: Any) -> SafeString:
    """A payload, indented, as the viewer may see it (``weft.view_payload``)."""
    return pre_json(shown(value))


def payload_text(value: Any, limit: int | None = None) -> str:
    """A payload on one line, as the viewer may see it."""
    return json_text(shown(value), limit)


def admin_link(viewname: str, pk: Any, text: str) -> str:
    """A link to an admin page, or the bare text when the page is not routed."""
    try:
        url = reverse(viewname, args=[quote(pk)])
    except NoReverseMatch:
        return text
    return format_html('<a href="{}">{}</a>', url, text)


def db() -> str:
    """The alias every weft query uses (``WEFT["DATABASE"]``), the admin's too."""
    return get_settings().database


def actor(request: HttpRequest) -> str:
    """The ``ClaimEvent.engine_id`` an admin rotation is recorded under."""
    username = request.user.get_username() if request.user.is_authenticated else "anonymous"
    return f"admin:{username}"[:200]


def is_storable_key(model: Any, value: str) -> bool:
    """``value`` could be a primary key of ``model``: its field accepts it, and it
    has no NUL (PostgreSQL refuses one in any text it is compared with)."""
    if "\x00" in value:
        return False
    try:
        model._meta.pk.to_python(value)
    except (ValidationError, ValueError, TypeError):
        return False
    return True


class WeftDatabaseMixin:
    """Admin querysets read ``WEFT["DATABASE"]``, like every other weft query.

    And an action's selection is checked first: Django filters the changelist
    by the posted ``_selected_action`` values as they are, so one that is no
    key at all (a hand-made or hostile POST: a NUL for a UUID key) made a
    500. Such values are dropped -- they can select no row -- before Django
    reads the selection; with none left, Django answers "no items selected".
    """

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        return super().get_queryset(request).using(db())  # type: ignore[misc]

    def get_object(self, request: HttpRequest, object_id: str, from_field: Any = None) -> Any:
        # A NUL in an object id can match no row, and PostgreSQL refuses to even
        # compare one (a DataError, a 500): "no such object", as for any other.
        if "\x00" in unquote(object_id):
            return None
        return super().get_object(request, object_id, from_field)  # type: ignore[misc]

    def changeform_view(self, request: HttpRequest, *args: Any, **kwargs: Any) -> Any:
        with viewing(may_view_payloads(request.user)):  # weft.view_payload
            response = super().changeform_view(request, *args, **kwargs)  # type: ignore[misc]
            if hasattr(response, "render"):
                response.render()
            return response

    def changelist_view(self, request: HttpRequest, extra_context: Any = None) -> Any:
        with viewing(may_view_payloads(request.user)):  # weft.view_payload
            response = self._changelist_view(request, extra_context)
            if hasattr(response, "render"):
                response.render()
            return response

    def _changelist_view(self, request: HttpRequest, extra_context: Any = None) -> Any:
        # The same for a NUL in a filter, search or ordering parameter: Django's
        # answer to a filter it cannot apply (the changelist with ?e=1).
        if any("\x00" in text for item in request.GET.lists() for text in (item[0], *item[1])):
            return HttpResponseRedirect(f"{request.path}?{ERROR_FLAG}=1")
        return super().changelist_view(request, extra_context)  # type: ignore[misc]

    def response_action(
        self, request: HttpRequest, queryset: QuerySet[Any], *args: Any, **kwargs: Any
    ) -> HttpResponse | None:
        name = helpers.ACTION_CHECKBOX_NAME
        selected = request.POST.getlist(name)
        model = self.model  # type: ignore[attr-defined]
        keys = [value for value in selected if is_storable_key(model, value)]
        if len(keys) != len(selected):
            post = request.POST.copy()
            post.setlist(name, keys)
            request.POST = post  # type: ignore[assignment]
        return super().response_action(request, queryset, *args, **kwargs)  # type: ignore[misc,no-any-return]


class ReadOnlyAdmin(WeftDatabaseMixin, admin.ModelAdmin):
    """No add, change or delete through forms: rows are written by the protocol."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class ReadOnlyInline(WeftDatabaseMixin, admin.TabularInline):
    """An inline that only lists rows (the journal and timers are fenced writes)."""

    extra = 0
    can_delete = False
    show_change_link = False

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


__all__ = [
    "ReadOnlyAdmin",
    "ReadOnlyInline",
    "WeftDatabaseMixin",
    "actor",
    "admin_link",
    "db",
    "json_text",
    "pre_json",
]
