"""The run changelist's own list filters: "cancel requested", and a column's values
read in index order (``db.distinct``) -- never by a ``SELECT DISTINCT`` that reads
every run on each list page."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest

from weft_django.db.distinct import distinct_values
from weft_django.models import WorkflowRun


class IndexedValuesFilter(admin.AllValuesFieldListFilter):
    """Django's all-values filter, its values read in index order (``db.distinct``):
    the stock one's ``SELECT DISTINCT`` read every run on each list page."""

    def __init__(
        self,
        field: Any,
        request: HttpRequest,
        params: Any,
        model: Any,
        model_admin: Any,
        field_path: str,
    ) -> None:
        super().__init__(field, request, params, model, model_admin, field_path)
        using = model_admin.get_queryset(request).db
        self.lookup_choices = distinct_values(model, field_path, using)  # type: ignore[assignment]


class CancelRequestedFilter(admin.SimpleListFilter):
    """Runs cleaning up under a cancel with a grace (``cancel_requested_at`` set)."""

    title = "cancel requested"
    parameter_name = "cancel_requested"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("yes", "yes"), ("no", "no")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[WorkflowRun]) -> Any:
        if self.value() == "yes":
            return queryset.filter(cancel_requested_at__isnull=False)
        if self.value() == "no":
            return queryset.filter(cancel_requested_at__isnull=True)
        return queryset


__all__ = ["CancelRequestedFilter", "IndexedValuesFilter"]
