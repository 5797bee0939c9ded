"""Search attributes in the admin: a list filter per declared str or bool
attribute, and the run page's table of a run's attributes.

Why only str and bool get a list filter: a list filter offers values to
click, and only those have few enough to list (the 20 most common values of
a str attribute; yes / no). Numbers and datetimes are filtered by ranges,
which the changelist's search box takes (``attr:amount>=100``,
``RunFilter.from_params``), as it takes every other run filter.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.contrib import admin
from django.db.models import Count, Exists, OuterRef, QuerySet
from django.http import HttpRequest
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from weft_django.admin.base import db
from weft_django.conf import get_settings
from weft_django.models import RunSearchAttribute, WorkflowRun

#: Values a str attribute's list filter offers (the most common first).
MAX_CHOICES = 20


class _AttributeFilter(admin.SimpleListFilter):
    """Runs whose attribute ``attribute`` (of type ``kind``) has the chosen value."""

    attribute = ""
    kind = "str"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        if self.kind == "bool":
            return [("true", "yes"), ("false", "no")]
        values = (
            RunSearchAttribute.objects.using(db())
            .filter(name=self.attribute, str_value__isnull=False)
            .values("str_value")
            .annotate(runs=Count("id"))
            .order_by("-runs", "str_value")[:MAX_CHOICES]
        )
        return [(str(row["str_value"]), str(row["str_value"])) for row in values]

    def queryset(self, request: HttpRequest, queryset: QuerySet[WorkflowRun]) -> Any:
        value = self.value()
        if value is None:
            return queryset
        condition: dict[str, Any] = (
            {"bool_value": value == "true"} if self.kind == "bool" else {"str_value": value}
        )
        rows = RunSearchAttribute.objects.filter(run_id=OuterRef("pk"), name=self.attribute)
        return queryset.filter(Exists(rows.filter(**condition)))


def attribute_filters() -> list[type[admin.SimpleListFilter]]:
    """A list filter class per declared str or bool attribute, in name order."""
    made: list[type[admin.SimpleListFilter]] = []
    for name, kind in sorted(get_settings().search_attributes.items()):
        if kind not in ("str", "bool"):
            continue
        made.append(
            type(
                f"AttributeFilter_{name}",
                (_AttributeFilter,),
                {
                    "title": f"attribute {name}",
                    "parameter_name": f"attr_{name}",
                    "attribute": name,
                    "kind": kind,
                },
            )
        )
    return made


def attributes_html(rows: list[RunSearchAttribute]) -> SafeString:
    """The run page's table: name, type, value."""
    if not rows:
        return format_html("{}", "none")

    def shown(value: Any) -> str:
        return value.isoformat() if isinstance(value, datetime) else str(value)

    body = format_html_join(
        "",
        "<tr><td>{}</td><td>{}</td><td><code>{}</code></td></tr>",
        ((row.name, row.type, shown(row.value)) for row in rows),
    )
    return format_html(
        "<table><thead><tr><th>name</th><th>type</th><th>value</th></tr></thead>"
        "<tbody>{}</tbody></table>",
        body,
    )


__all__ = ["MAX_CHOICES", "attribute_filters", "attributes_html"]
