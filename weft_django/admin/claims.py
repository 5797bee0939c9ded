"""Claims ("Holders"): read-only, filtered by state, plus the confirmed "force release".

"live", "expired" and "released" are the querysets' rules (the same the
API, ``weft_status`` and ``/metrics`` apply), judged against this process's
wall clock.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.contrib.admin.options import IncorrectLookupParameters
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.html import format_html
from django.utils.http import urlencode

from weft_django import client
from weft_django.conf import get_settings
from weft_django.engine.operations.stop import force_release_refusal
from weft_django.errors import WeftError
from weft_django.inspection import (
    CLAIM_STATES,
    claim_state,
    format_age,
    format_ms,
    takeover_grace_ms,
)
from weft_django.kernel.clock import wall_ms
from weft_django.models import WorkflowClaim, WorkflowRun

from .base import ReadOnlyAdmin, actor, db
from .reporting import ActionReport, refusal_reason
from .search import EXACT_SEARCH_HELP, ExactSearchMixin
from .timeline import claim_timeline

_STATE_COLOURS = {"live": "#2e7d32", "expired": "#ba2121", "released": "#666"}


class ClaimStateFilter(admin.SimpleListFilter):
    """live / expired / released / all (``WorkflowClaim.objects.live/expired/released``).

    Defaults to ``live``: the Holders page answers "who owns what now"; a
    store keeps a released claim row for every workflow id it ever ran, and
    those would bury the live ones. ``all`` is an explicit choice.
    """

    title = "state"
    parameter_name = "state"
    default = "live"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [(state, state) for state in CLAIM_STATES] + [("all", "all")]

    def value(self) -> str:
        return super().value() or self.default  # type: ignore[no-any-return]

    def choices(self, changelist: Any) -> Iterator[Any]:
        # No "All" entry that clears the parameter: cleared means the default.
        for lookup, title in self.lookup_choices:
            yield {
                "selected": self.value() == str(lookup),
                "query_string": changelist.get_query_string({self.parameter_name: lookup}),
                "display": title,
            }

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any] | None:
        now, grace = wall_ms(), takeover_grace_ms()
        if self.value() == "released":
            return queryset.released()  # type: ignore[attr-defined,no-any-return]
        if self.value() == "expired":
            return queryset.expired(now, grace)  # type: ignore[attr-defined,no-any-return]
        if self.value() == "live":
            return queryset.live(now, grace)  # type: ignore[attr-defined,no-any-return]
        if self.value() == "all":
            return queryset
        raise IncorrectLookupParameters(f"state {self.value()!r} is not one of {self._names()}")

    def _names(self) -> str:
        return ", ".join(str(lookup) for lookup, _title in self.lookup_choices)


@admin.register(WorkflowClaim)
class HolderAdmin(ExactSearchMixin, ReadOnlyAdmin):
    """Claims as "Holders": read-only, plus "force release" (a rotation, confirmed)."""

    list_display = ("workflow_id", "engine_id", "epoch", "claimed", "expires_in", "state")
    list_filter = (ClaimStateFilter,)
    search_fields = ("workflow_id", "engine_id")
    search_help_text = f"workflow id or engine id, {EXACT_SEARCH_HELP}"
    ordering = ("workflow_id",)
    list_per_page = 100
    actions = ("force_release",)
    fields = (
        "workflow_id",
        "epoch",
        "engine_id",
        "claimed",
        "expires",
        "expires_in",
        "state",
        "runs",
        "claim_timeline",
    )
    readonly_fields = fields

    @admin.display(description="claimed", ordering="claimed_at")
    def claimed(self, claim: WorkflowClaim) -> str:
        return format_ms(claim.claimed_at)

    @admin.display(description="expires at", ordering="expires_at")
    def expires(self, claim: WorkflowClaim) -> str:
        return format_ms(claim.expires_at, with_relative=True)

    @admin.display(description="expires in", ordering="expires_at")
    def expires_in(self, claim: WorkflowClaim) -> str:
        if claim.expires_at is None:
            return "-"
        seconds = (claim.expires_at - wall_ms()) / 1000
        return format_age(seconds) if seconds >= 0 else f"{format_age(-seconds)} ago"

    @admin.display(description="state")
    def state(self, claim: WorkflowClaim) -> str:
        value = claim_state(claim, wall_ms())
        return format_html('<strong style="color:{}">{}</strong>', _STATE_COLOURS[value], value)

    @admin.display(description="runs")
    def runs(self, claim: WorkflowClaim) -> str:
        url = reverse("admin:weft_workflowrun_changelist")
        count = WorkflowRun.objects.using(db()).filter(workflow_id=claim.workflow_id).count()
        query = urlencode({"q": claim.workflow_id})
        return format_html('<a href="{}?{}">{} run(s)</a>', url, query, count)

    @admin.display(description="claim events")
    def claim_timeline(self, claim: WorkflowClaim) -> str:
        return claim_timeline(claim.workflow_id)

    def has_force_release_permission(self, request: HttpRequest) -> bool:
        # The action is a write; it needs the model's change permission even
        # though the form itself is read-only.
        return request.user.has_perm("weft.change_workflowclaim")

    @admin.action(
        description="Force release selected holders",
        permissions=["force_release"],
    )
    def force_release(
        self, request: HttpRequest, queryset: QuerySet[WorkflowClaim]
    ) -> HttpResponse | None:
        # Refused before the confirmation page, by the runtime's own rule.
        refusal = force_release_refusal(get_settings().ownership)
        if refusal is not None:
            messages.error(request, refusal[0].upper() + refusal[1:] + ".")
            return None
        if request.POST.get("post") == "yes":
            who = actor(request)
            report = ActionReport("force released", "holder")
            for claim in queryset:
                try:
                    epoch = client.force_release(claim.workflow_id, actor=who)
                except WeftError as exc:
                    report.refuse(refusal_reason(exc), claim.workflow_id)
                else:
                    report.ok(claim, f"{claim.workflow_id}: epoch {claim.epoch} → {epoch}")
            report.send(request, "force_release")
            return None
        now = wall_ms()
        claims = [
            {"obj": claim, "state": claim_state(claim, now), "next_epoch": claim.epoch + 1}
            for claim in queryset
        ]
        context = {
            **self.admin_site.each_context(request),
            "title": "Force release: rotate the epoch?",
            "opts": self.model._meta,
            "claims": claims,
            "queryset": queryset,
            "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
            "action_name": "force_release",
            "media": self.media,
        }
        request.current_app = self.admin_site.name
        return TemplateResponse(
            request, "admin/weft/workflowclaim/force_release_confirmation.html", context
        )


__all__ = ["ClaimStateFilter", "HolderAdmin"]
