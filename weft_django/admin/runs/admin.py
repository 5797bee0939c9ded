"""The run changelist and page: owner, journal, timers, activity progress and claim
history. Nothing is added, changed or deleted by form; every action goes through
``client`` (fenced, as the API and the CLI act), and acts on a workflow id's latest
run only; a bulk action runs in fenced chunks, whatever the selection's size."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from django.utils.html import format_html
from django.utils.safestring import SafeString

from weft_django import client
from weft_django.admin.base import WeftDatabaseMixin, actor, admin_link, db, payload_pre, shown
from weft_django.admin.reporting import ActionReport, refusal_reason
from weft_django.admin.search import EXACT_SEARCH_HELP, ExactSearchMixin, exact_or_prefix
from weft_django.admin.timeline import claim_timeline
from weft_django.db.counting import BoundedCountPaginator
from weft_django.engine.operations.bulk import BulkAction, BulkLog, run_many_on
from weft_django.engine.runs.filters import PARAM_KEYS, RunFilter
from weft_django.errors import InvalidRunFilter, WeftError
from weft_django.inspection import claim_state, format_age
from weft_django.kernel.clock import wall_ms
from weft_django.models import RunSearchAttribute, WorkflowClaim, WorkflowRun

from .columns import RunListMixin
from .confirm import confirmation_page, confirmed
from .filters import CancelRequestedFilter, IndexedValuesFilter
from .inlines import ActivityHeartbeatInline, TimerInline
from .layout import RunLayoutMixin
from .page import error_html, journal_html, journal_page, requested_page, waits_html
from .repair import repair_urls
from .replay_action import replay_against_current_code
from .search_attributes import attribute_filters, attributes_html
from .times import RunTimesMixin

RunAction = Callable[[str, str], Any]
"""``(workflow_id, actor)``: one client call of an admin action."""


@admin.register(WorkflowRun)
class WorkflowRunAdmin(
    RunLayoutMixin,
    RunListMixin,
    RunTimesMixin,
    ExactSearchMixin,
    WeftDatabaseMixin,
    admin.ModelAdmin,
):
    """Runs with their owner, journal, timers, activity progress and claim history;
    actions via ``client``."""

    list_display = (
        "workflow_id",
        "name",
        "status_badge",
        "why",
        "cancel_pending",
        "owner_engine",
        "claim_epoch",
        "queue",
        "age",
    )
    list_filter = (
        "status",
        CancelRequestedFilter,
        ("name", IndexedValuesFilter),
        ("queue", IndexedValuesFilter),
        "created_at",
        "finished_at",
    )
    search_fields = ("workflow_id", "idempotency_key")
    search_help_text = (
        f"workflow id or idempotency key, {EXACT_SEARCH_HELP}; or filters, all of which must "
        "hold: attr:customer=acme attr:amount>=100 parent:order-1 status:failed,timed_out "
        "workflow:order created_after:2026-01-01 finished_before:2026-02-01T12:00Z"
    )
    list_per_page = 50
    # Page counts exact up to COUNT_CAP runs, estimated above (``db.counting``);
    # no second count of every run for "N total".
    paginator = BoundedCountPaginator
    show_full_result_count = False
    # The journal is shown once, paged: the "Journal timeline" field (``runs.page``).
    inlines = (TimerInline, ActivityHeartbeatInline)
    actions = (
        "cancel_runs",
        "force_cancel_runs",
        "suspend_runs",
        "resume_runs",
        "retry_runs",
        "replay_against_current_code",
    )
    replay_against_current_code = replay_against_current_code
    readonly_fields = (
        "id",
        "workflow_id",
        "name",
        "status",
        "owner_engine",
        "claim_epoch",
        "claim_state_text",
        "idempotency_key",
        "parent",
        "continued_from",
        "suspended_reason",
        "cancel_requested_text",
        "cancel_reason_text",
        "cancel_deadline_text",
        "queue",
        "priority",
        "concurrency_key",
        "waiting_reason_text",
        "created_text",
        "updated_text",
        "started_text",
        "finished_text",
        "duration",
        "start_at_text",
        "deadline_text",
        "input_pretty",
        "result_pretty",
        "error_pretty",
        "claim_timeline",
        "journal_timeline",
        "search_attributes_text",
        "timeline_chart",
    )

    def get_queryset(self, request: HttpRequest) -> QuerySet[WorkflowRun]:
        return super().get_queryset(request).with_claim()  # type: ignore[attr-defined,no-any-return]

    def get_list_filter(self, request: HttpRequest) -> Any:
        # One filter per declared str or bool search attribute (its values).
        return (*super().get_list_filter(request), *attribute_filters())

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[WorkflowRun], search_term: str
    ) -> tuple[QuerySet[WorkflowRun], bool]:
        """Exact ids (``ExactSearchMixin``), and ``key:value`` run filters
        (``RunFilter.from_params``: ``attr:amount>=100``, ``parent:order-1``, ...)."""
        params: dict[str, list[str]] = {}
        ids: list[str] = []
        for term in search_term.split():
            key, colon, value = term.partition(":")
            if colon and key in PARAM_KEYS and value:
                params.setdefault(key, []).append(value)
            else:
                ids.append(term)
        if params:
            try:
                chosen = RunFilter.from_params(params)
            except InvalidRunFilter as error:
                messages.error(request, str(error))
                return queryset.none(), False
            queryset = queryset.filter(pk__in=chosen.queryset(db()).values("pk"))
        query = exact_or_prefix(tuple(self.search_fields), " ".join(ids))
        return (queryset if query is None else queryset.filter(query)), False

    # Runs are never edited or deleted by form: state changes go through client.
    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        # Object pages are view-only; the changelist keeps "change" for the actions.
        return obj is None and super().has_change_permission(request)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    # -- columns --
    @admin.display(description="owner engine", ordering="claim_engine_id")
    def owner_engine(self, run: WorkflowRun) -> str:
        engine_id = getattr(run, "claim_engine_id", None)
        if not engine_id:
            return "-"
        return admin_link("admin:weft_enginerecord_change", engine_id, engine_id)

    @admin.display(description="epoch", ordering="claim_epoch")
    def claim_epoch(self, run: WorkflowRun) -> int | str:
        epoch = getattr(run, "claim_epoch", None)
        return "-" if epoch is None else epoch

    @admin.display(description="age", ordering="created_at")
    def age(self, run: WorkflowRun) -> str:
        return format_age((timezone.now() - run.created_at).total_seconds())

    @admin.display(description="claim")
    def claim_state_text(self, run: WorkflowRun) -> str:
        claim = WorkflowClaim.objects.using(db()).filter(pk=run.workflow_id).first()
        if claim is None:
            return "never claimed"
        link = admin_link("admin:weft_workflowclaim_change", claim.pk, "holder")
        return format_html("{} ({})", claim_state(claim, wall_ms()), link)

    @admin.display(description="waits for")
    def waiting_reason_text(self, run: WorkflowRun) -> SafeString:
        return waits_html(run)

    @admin.display(description="input")
    def input_pretty(self, run: WorkflowRun) -> SafeString:
        return payload_pre(run.input)

    @admin.display(description="result")
    def result_pretty(self, run: WorkflowRun) -> SafeString:
        return payload_pre(run.result)

    @admin.display(description="error")
    def error_pretty(self, run: WorkflowRun) -> SafeString:
        return error_html(shown(run.error))

    @admin.display(description="claim events")
    def claim_timeline(self, run: WorkflowRun) -> str:
        return claim_timeline(run.workflow_id)

    @admin.display(description="search attributes")
    def search_attributes_text(self, run: WorkflowRun) -> SafeString:
        rows = RunSearchAttribute.objects.using(db()).filter(run_id=run.pk).order_by("name")
        return attributes_html(list(rows))

    @admin.display(description="journal (with claim events)")
    def journal_timeline(self, run: WorkflowRun) -> str:
        return journal_html(run)

    def get_urls(self) -> list[Any]:
        # ``<pk>/repair/<position>/``: fork or reset from a journal entry (``admin.runs.repair``).
        return [*repair_urls(self), *super().get_urls()]

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        # One journal page per request (``?journal_page=``): the page stays bounded.
        with journal_page(requested_page(request)):
            response = super().change_view(request, object_id, form_url, extra_context)
            if hasattr(response, "render"):
                response.render()  # inside the block: the fields render now
            return response

    # -- actions (through client; one summary message, a LogEntry per run acted on) --
    def _apply(
        self,
        request: HttpRequest,
        queryset: QuerySet[WorkflowRun],
        verb: str,
        action: RunAction,
        name: str,
    ) -> None:
        report = ActionReport(verb, "run")
        seen: set[str] = set()
        runs = WorkflowRun.objects.using(db()).only("pk")
        for run in queryset.only("pk", "workflow_id", "name", "status"):
            if run.workflow_id in seen:
                continue
            seen.add(run.workflow_id)
            latest = runs.latest_for(run.workflow_id)
            if latest is not None and latest.pk != run.pk:
                # The client acts on a workflow id's latest run only.
                report.refuse("not the latest run of their workflow id", run.workflow_id)
                continue
            try:
                action(run.workflow_id, actor(request))
            except WeftError as exc:
                report.refuse(refusal_reason(exc), run.workflow_id)
            else:
                report.ok(run, run.workflow_id)
        report.send(request, name)

    def _apply_many(
        self,
        request: HttpRequest,
        queryset: QuerySet[WorkflowRun],
        verb: str,
        action: BulkAction,
        name: str,
        reason: str = "",
    ) -> None:
        """A bulk action over the selection (or "select all"): ``client``'s bulk
        operation, in fenced chunks -- 10,000 selected runs cost O(chunks)
        statements, not 10,000 round trips. One summary; a LogEntry per run."""
        log = BulkLog()
        run_many_on(action, queryset, reason=reason, actor=actor(request), log=log)
        report = ActionReport(verb, "run")
        for row in log.changed:
            run = WorkflowRun(
                pk=row["pk"], workflow_id=row["workflow_id"], name=row["name"], status=row["status"]
            )
            report.ok(run, row["workflow_id"])
        for workflow_id, why in sorted(log.skipped, key=lambda item: (item[1], item[0])):
            report.refuse(why, workflow_id)
        report.send(request, name)

    @admin.action(description="Cancel selected runs", permissions=["change"])
    def cancel_runs(
        self, request: HttpRequest, queryset: QuerySet[WorkflowRun]
    ) -> HttpResponse | None:
        if not confirmed(request):
            return confirmation_page(
                self,
                request,
                queryset,
                action_name="cancel_runs",
                label="Cancel",
                explanation="Each run's claim rotates; a workflow that declares a cancel_grace "
                "gets WorkflowCancelled and cleans up first, the others end cancelled at once, "
                "with their live children.",
                confirm_label="Yes, cancel them",
            )
        who = actor(request)
        self._apply_many(
            request, queryset, "cancelled", "cancel", "cancel_runs", reason=f"cancelled by {who}"
        )
        return None

    @admin.action(description="Force cancel selected runs", permissions=["change"])
    def force_cancel_runs(
        self, request: HttpRequest, queryset: QuerySet[WorkflowRun]
    ) -> HttpResponse | None:
        if not confirmed(request):
            return confirmation_page(
                self,
                request,
                queryset,
                action_name="force_cancel_runs",
                label="Force cancel",
                explanation="Each run ends cancelled at once: no cleanup runs, and a run "
                "that is cleaning up after a cancel stops.",
                confirm_label="Yes, force cancel them",
            )
        self._apply(
            request,
            queryset,
            "force cancelled",
            lambda wid, who: client.cancel(wid, f"force cancelled by {who}", force=True, actor=who),
            "force_cancel_runs",
        )
        return None

    @admin.action(description="Suspend selected runs", permissions=["change"])
    def suspend_runs(
        self, request: HttpRequest, queryset: QuerySet[WorkflowRun]
    ) -> HttpResponse | None:
        if not confirmed(request):
            return confirmation_page(
                self,
                request,
                queryset,
                action_name="suspend_runs",
                label="Suspend",
                explanation="Each run's claim rotates and the run stops where it is until "
                "someone resumes it.",
                confirm_label="Yes, suspend them",
            )
        self._apply(
            request,
            queryset,
            "suspended",
            lambda wid, who: client.suspend(wid, f"suspended by {who}", actor=who),
            "suspend_runs",
        )
        return None

    @admin.action(description="Resume selected suspended runs", permissions=["change"])
    def resume_runs(self, request: HttpRequest, queryset: QuerySet[WorkflowRun]) -> None:
        self._apply_many(request, queryset, "resumed", "resume", "resume_runs")

    @admin.action(description="Retry selected failed or timed-out runs", permissions=["change"])
    def retry_runs(self, request: HttpRequest, queryset: QuerySet[WorkflowRun]) -> None:
        self._apply_many(request, queryset, "retried", "retry", "retry_runs")


__all__ = ["WorkflowRunAdmin"]
