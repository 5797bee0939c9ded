"""The Django admin for weft (SPEC §5 "Admin"): read-mostly inspection.

Why read-mostly: every row here belongs to the fenced claim protocol or to a
run an engine may be driving right now. A plain admin "save" would write
stale values behind the engine's back, unfenced, and a "delete" would skip
the claim rotation that stops the owner. So no model here can be added,
changed or deleted through a form; the only writes are the actions, and
each goes through ``weft_django.engine.client`` (cancel, suspend, resume,
retry, force release), which fences, rotates and notifies exactly as the
API and the CLI do.

Claim and heartbeat timestamps are engine-clock milliseconds; "expires in",
"alive" and "heartbeat age" judge them against this process's wall clock
(``weft_django.cluster``), the same judgement ``weft_status`` and the
Prometheus collector use.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.contrib.admin.utils import quote
from django.db.models import Count, IntegerField, OuterRef, Q, QuerySet, Subquery, Value
from django.db.models.functions import Coalesce
from django.http import HttpRequest, HttpResponse
from django.template.loader import render_to_string
from django.template.response import TemplateResponse
from django.urls import NoReverseMatch, reverse
from django.utils import timezone
from django.utils.html import format_html
from django.utils.http import urlencode
from django.utils.safestring import SafeString, mark_safe

from weft_django.cluster import (
    alive_engines_q,
    alive_window_ms,
    claim_state,
    engine_is_alive,
    expired_claims_q,
    format_age,
    format_ms,
    wall_ms,
)
from weft_django.conf import get_settings
from weft_django.engine import client
from weft_django.errors import WeftError
from weft_django.models import (
    ClaimEvent,
    EngineRecord,
    GlobalLease,
    JournalEntry,
    OwnershipModeMarker,
    Timer,
    WorkflowClaim,
    WorkflowRun,
)
from weft_django.ownership.metrics import CLAIM_ATTEMPT_OUTCOMES, ClaimMetricsSnapshot

#: The claim timeline and the journal timeline show at most this many rows.
TIMELINE_LIMIT = 500


# -- formatting helpers ---------------------------------------------------------


def _json_text(value: Any, limit: int | None = None) -> str:
    text = json.dumps(value, indent=None if limit else 2, sort_keys=True, default=str)
    if limit is not None and len(text) > limit:
        return text[: limit - 1] + "…"
    return text


def _pre_json(value: Any) -> SafeString:
    if value is None:
        return mark_safe("-")
    return format_html('<pre style="margin:0;white-space:pre-wrap">{}</pre>', _json_text(value))


def _admin_link(viewname: str, pk: Any, text: str) -> str:
    try:
        url = reverse(viewname, args=[quote(pk)])
    except NoReverseMatch:
        return text
    return format_html('<a href="{}">{}</a>', url, text)


def _db() -> str:
    """The alias every weft query uses (``WEFT["DATABASE"]``), the admin's too."""
    return get_settings().database


def _actor(request: HttpRequest) -> str:
    """The ``ClaimEvent.engine_id`` an admin rotation is recorded under."""
    username = request.user.get_username() if request.user.is_authenticated else "anonymous"
    return f"admin:{username}"[:200]


class WeftDatabaseMixin:
    """Admin querysets read ``WEFT["DATABASE"]``, like every other weft query."""

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        return super().get_queryset(request).using(_db())  # type: ignore[misc]


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


# -- runs ---------------------------------------------------------------------------


class JournalEntryInline(ReadOnlyInline):
    model = JournalEntry
    fields = ("position", "kind", "command", "target", "outcome", "engine_id", "epoch", "at")
    readonly_fields = fields
    ordering = ("position",)
    verbose_name_plural = "journal"

    @admin.display(description="result / error")
    def outcome(self, entry: JournalEntry) -> str:
        if entry.error is not None:
            return format_html(
                '<span style="color:#ba2121">{}</span>', _json_text(entry.error, 200)
            )
        return _json_text(entry.result, 200)

    @admin.display(description="at")
    def at(self, entry: JournalEntry) -> str:
        return format_ms(entry.at_ms)


class TimerInline(ReadOnlyInline):
    model = Timer
    fields = ("kind", "position", "fire", "due_in", "dispatched", "engine_id", "epoch")
    readonly_fields = fields
    ordering = ("fire_at",)

    @admin.display(description="fire at")
    def fire(self, timer: Timer) -> str:
        return format_ms(timer.fire_at)

    @admin.display(description="due in")
    def due_in(self, timer: Timer) -> str:
        return format_age((timer.fire_at - wall_ms()) / 1000)

    @admin.display(description="dispatched at")
    def dispatched(self, timer: Timer) -> str:
        return format_ms(timer.dispatched_at)


def _claim_subquery(column: str) -> Subquery:
    return Subquery(WorkflowClaim.objects.filter(pk=OuterRef("workflow_id")).values(column)[:1])


RunAction = Callable[[str, str], Any]


@admin.register(WorkflowRun)
class WorkflowRunAdmin(WeftDatabaseMixin, admin.ModelAdmin):
    """Runs with their owner, journal, timers and claim history; actions via ``client``."""

    list_display = ("workflow_id", "name", "status", "owner_engine", "claim_epoch", "age")
    list_filter = ("status", "name")
    search_fields = ("workflow_id", "idempotency_key")
    search_help_text = "workflow id or idempotency key"
    list_per_page = 50
    inlines = (JournalEntryInline, TimerInline)
    actions = ("cancel_runs", "suspend_runs", "resume_runs", "retry_runs")
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
        "created_at",
        "started_at",
        "finished_at",
        "age",
        "start_at_text",
        "deadline_text",
        "input_pretty",
        "result_pretty",
        "error_pretty",
        "claim_timeline",
        "journal_timeline",
    )
    fieldsets = (
        (
            None,
            {
                "fields": (
                    ("workflow_id", "status"),
                    ("name", "id"),
                    ("owner_engine", "claim_epoch", "claim_state_text"),
                    "idempotency_key",
                    ("parent", "continued_from"),
                    "suspended_reason",
                    ("created_at", "started_at", "finished_at", "age"),
                    ("start_at_text", "deadline_text"),
                )
            },
        ),
        ("Data", {"fields": ("input_pretty", "result_pretty", "error_pretty")}),
        ("Claim timeline", {"fields": ("claim_timeline",)}),
        ("Journal timeline", {"fields": ("journal_timeline",)}),
    )

    def get_queryset(self, request: HttpRequest) -> QuerySet[WorkflowRun]:
        # The claim is keyed by workflow id (not a foreign key): join it by subquery.
        return (
            super()
            .get_queryset(request)
            .annotate(
                _claim_engine=_claim_subquery("engine_id"),
                _claim_epoch=_claim_subquery("epoch"),
            )
        )

    # Runs are never edited or deleted by form: state changes go through client.
    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        # Object pages are view-only; the changelist keeps "change" for the actions.
        return obj is None and super().has_change_permission(request)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    # -- columns --
    @admin.display(description="owner engine", ordering="_claim_engine")
    def owner_engine(self, run: WorkflowRun) -> str:
        engine_id = getattr(run, "_claim_engine", None)
        if not engine_id:
            return "-"
        return _admin_link("admin:weft_enginerecord_change", engine_id, engine_id)

    @admin.display(description="epoch", ordering="_claim_epoch")
    def claim_epoch(self, run: WorkflowRun) -> int | str:
        epoch = getattr(run, "_claim_epoch", None)
        return "-" if epoch is None else epoch

    @admin.display(description="age", ordering="created_at")
    def age(self, run: WorkflowRun) -> str:
        return format_age((timezone.now() - run.created_at).total_seconds())

    @admin.display(description="claim")
    def claim_state_text(self, run: WorkflowRun) -> str:
        claim = WorkflowClaim.objects.using(_db()).filter(pk=run.workflow_id).first()
        if claim is None:
            return "never claimed"
        link = _admin_link("admin:weft_workflowclaim_change", claim.pk, "holder")
        return format_html("{} ({})", claim_state(claim, wall_ms()), link)

    @admin.display(description="start at")
    def start_at_text(self, run: WorkflowRun) -> str:
        return format_ms(run.start_at)

    @admin.display(description="deadline")
    def deadline_text(self, run: WorkflowRun) -> str:
        return format_ms(run.deadline_at)

    @admin.display(description="input")
    def input_pretty(self, run: WorkflowRun) -> SafeString:
        return _pre_json(run.input)

    @admin.display(description="result")
    def result_pretty(self, run: WorkflowRun) -> SafeString:
        return _pre_json(run.result)

    @admin.display(description="error")
    def error_pretty(self, run: WorkflowRun) -> SafeString:
        return _pre_json(run.error)

    @admin.display(description="claim events")
    def claim_timeline(self, run: WorkflowRun) -> str:
        events = ClaimEvent.objects.using(_db()).filter(workflow_id=run.workflow_id)
        total = events.count()
        rows = list(reversed(events.order_by("-id")[:TIMELINE_LIMIT]))
        return render_to_string(
            "admin/weft/includes/claim_timeline.html",
            {"events": [_event_row(e) for e in rows], "total": total, "shown": len(rows)},
        )

    @admin.display(description="journal (with claim events)")
    def journal_timeline(self, run: WorkflowRun) -> str:
        entries = list(run.journal.order_by("position")[:TIMELINE_LIMIT])
        total = run.journal.count()
        items: list[dict[str, Any]] = [
            {
                "at_ms": e.at_ms,
                "sort": (e.at_ms, 1, e.position),
                "type": "journal",
                "position": e.position,
                "kind": e.kind,
                "target": e.target,
                "engine_id": e.engine_id,
                "epoch": e.epoch,
                "failed": e.error is not None,
                "outcome": _json_text(e.error if e.error is not None else e.result, 160),
            }
            for e in entries
        ]
        # Claim events of the workflow id, interleaved by time: who wrote under
        # which epoch. At equal times a claim is taken before and released after
        # the journal writes of the same commit.
        events = reversed(
            ClaimEvent.objects.using(_db())
            .filter(workflow_id=run.workflow_id)
            .order_by("-id")[:TIMELINE_LIMIT]
        )
        items.extend(
            {
                "at_ms": ev.at_ms,
                "sort": (ev.at_ms, 0 if ev.kind in ("acquire", "takeover") else 2, ev.pk),
                "type": "claim",
                "kind": ev.kind,
                "engine_id": ev.engine_id,
                "epoch": ev.epoch,
                "reason": ev.reason,
            }
            for ev in events
        )
        items.sort(key=lambda item: item["sort"])
        start = items[0]["at_ms"] if items else 0
        previous_writer: tuple[str, int] | None = None
        for item in items:
            item["at"] = format_ms(item["at_ms"])
            item["offset"] = format_age((item["at_ms"] - start) / 1000)
            if item["type"] == "journal":
                writer = (item["engine_id"], item["epoch"])
                item["handover"] = previous_writer is not None and writer != previous_writer
                previous_writer = writer
        return render_to_string(
            "admin/weft/includes/journal_timeline.html",
            {"items": items, "total": total, "shown": len(entries)},
        )

    # -- actions (through client, per-run errors as messages) --
    def _apply(
        self, request: HttpRequest, queryset: QuerySet[WorkflowRun], verb: str, action: RunAction
    ) -> None:
        done: list[str] = []
        seen: set[str] = set()
        for run in queryset.only("pk", "workflow_id", "status"):
            if run.workflow_id in seen:
                continue
            seen.add(run.workflow_id)
            latest = (
                WorkflowRun.objects.using(_db())
                .filter(workflow_id=run.workflow_id)
                .order_by("-created_at", "-pk")
                .only("pk")
                .first()
            )
            if latest is not None and latest.pk != run.pk:
                messages.error(
                    request,
                    f"{run.workflow_id}: run {run.pk} is not the latest run of this workflow "
                    f"id; {verb} acts on the latest run only.",
                )
                continue
            try:
                action(run.workflow_id, _actor(request))
            except WeftError as exc:
                messages.error(request, f"{run.workflow_id}: {exc}")
            else:
                done.append(run.workflow_id)
        if done:
            shown = ", ".join(done[:10]) + (f" and {len(done) - 10} more" if len(done) > 10 else "")
            messages.success(request, f"{verb.capitalize()}: {shown}.")

    @admin.action(description="Cancel selected runs (rotates their claims)", permissions=["change"])
    def cancel_runs(self, request: HttpRequest, queryset: QuerySet[WorkflowRun]) -> None:
        self._apply(
            request,
            queryset,
            "cancelled",
            lambda wid, actor: client.cancel(wid, f"cancelled by {actor}", actor=actor),
        )

    @admin.action(
        description="Suspend selected runs (rotates their claims)", permissions=["change"]
    )
    def suspend_runs(self, request: HttpRequest, queryset: QuerySet[WorkflowRun]) -> None:
        self._apply(
            request,
            queryset,
            "suspended",
            lambda wid, actor: client.suspend(wid, f"suspended by {actor}", actor=actor),
        )

    @admin.action(description="Resume selected suspended runs", permissions=["change"])
    def resume_runs(self, request: HttpRequest, queryset: QuerySet[WorkflowRun]) -> None:
        self._apply(request, queryset, "resumed", lambda wid, actor: client.resume(wid))

    @admin.action(description="Retry selected failed or timed-out runs", permissions=["change"])
    def retry_runs(self, request: HttpRequest, queryset: QuerySet[WorkflowRun]) -> None:
        self._apply(request, queryset, "retried", lambda wid, actor: client.retry(wid))


def _event_row(event: ClaimEvent) -> dict[str, Any]:
    return {
        "at": format_ms(event.at_ms),
        "kind": event.kind,
        "epoch": event.epoch,
        "engine_id": event.engine_id or "-",
        "previous_engine_id": event.previous_engine_id or "-",
        "previous_expires_at": format_ms(event.previous_expires_at),
        "reason": event.reason,
    }


# -- holders (claims) -------------------------------------------------------------


class ClaimStateFilter(admin.SimpleListFilter):
    """live / expired / released, judged like ``weft_status`` (``cluster``)."""

    title = "state"
    parameter_name = "state"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("live", "live"), ("expired", "expired"), ("released", "released")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any] | None:
        released = Q(engine_id__isnull=True, expires_at__isnull=True, claimed_at__isnull=True)
        expired = expired_claims_q(wall_ms())
        if self.value() == "released":
            return queryset.filter(released)
        if self.value() == "expired":
            return queryset.filter(expired)
        if self.value() == "live":
            return queryset.exclude(released).exclude(expired)
        return queryset


@admin.register(WorkflowClaim)
class HolderAdmin(ReadOnlyAdmin):
    """Claims as "Holders": read-only, plus "force release" (a rotation, confirmed)."""

    list_display = ("workflow_id", "engine_id", "epoch", "claimed", "expires_in", "state")
    list_filter = (ClaimStateFilter,)
    search_fields = ("workflow_id", "engine_id")
    search_help_text = "workflow id or engine id"
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
        return format_ms(claim.expires_at)

    @admin.display(description="expires in", ordering="expires_at")
    def expires_in(self, claim: WorkflowClaim) -> str:
        if claim.expires_at is None:
            return "-"
        seconds = (claim.expires_at - wall_ms()) / 1000
        return format_age(seconds) if seconds >= 0 else f"{format_age(-seconds)} ago"

    @admin.display(description="state")
    def state(self, claim: WorkflowClaim) -> str:
        value = claim_state(claim, wall_ms())
        colour = {"live": "#2e7d32", "expired": "#ba2121", "released": "#666"}[value]
        return format_html('<strong style="color:{}">{}</strong>', colour, value)

    @admin.display(description="runs")
    def runs(self, claim: WorkflowClaim) -> str:
        url = reverse("admin:weft_workflowrun_changelist")
        count = WorkflowRun.objects.using(_db()).filter(workflow_id=claim.workflow_id).count()
        query = urlencode({"q": claim.workflow_id})
        return format_html('<a href="{}?{}">{} run(s)</a>', url, query, count)

    @admin.display(description="claim events")
    def claim_timeline(self, claim: WorkflowClaim) -> str:
        events = ClaimEvent.objects.using(_db()).filter(workflow_id=claim.workflow_id)
        total = events.count()
        rows = list(reversed(events.order_by("-id")[:TIMELINE_LIMIT]))
        return render_to_string(
            "admin/weft/includes/claim_timeline.html",
            {"events": [_event_row(e) for e in rows], "total": total, "shown": len(rows)},
        )

    def has_force_release_permission(self, request: HttpRequest) -> bool:
        # The action is a write; it needs the model's change permission even
        # though the form itself is read-only.
        return request.user.has_perm("weft.change_workflowclaim")

    @admin.action(
        description="Force release selected holders (rotate the epoch)",
        permissions=["force_release"],
    )
    def force_release(
        self, request: HttpRequest, queryset: QuerySet[WorkflowClaim]
    ) -> HttpResponse | None:
        mode = get_settings().ownership
        if mode != "workflow-lease":
            messages.error(
                request,
                f'Force release applies to OWNERSHIP="workflow-lease" only (configured: "{mode}").',
            )
            return None
        if request.POST.get("post") == "yes":
            actor = _actor(request)
            for claim in queryset:
                try:
                    epoch = client.force_release(claim.workflow_id, actor=actor)
                except WeftError as exc:
                    messages.error(request, f"{claim.workflow_id}: {exc}")
                else:
                    messages.success(
                        request,
                        f"{claim.workflow_id}: rotated epoch {claim.epoch} → {epoch}; "
                        f"{claim.engine_id or 'no holder'} no longer owns it.",
                    )
            return None
        now = wall_ms()
        claims = [
            {
                "obj": claim,
                "state": claim_state(claim, now),
                "next_epoch": claim.epoch + 1,
            }
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


# -- engines ------------------------------------------------------------------------


class EngineAliveFilter(admin.SimpleListFilter):
    title = "alive"
    parameter_name = "alive"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("yes", "alive"), ("no", "stopped or silent")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any] | None:
        alive = alive_engines_q(wall_ms(), alive_window_ms())
        if self.value() == "yes":
            return queryset.filter(alive)
        if self.value() == "no":
            return queryset.exclude(alive)
        return queryset


def _counters(record: EngineRecord) -> ClaimMetricsSnapshot:
    return ClaimMetricsSnapshot.from_json(record.metrics)


@admin.register(EngineRecord)
class EngineRecordAdmin(ReadOnlyAdmin):
    """Engine boots: alive, node, heartbeat age, claims held, their counters."""

    list_display = (
        "engine_id",
        "alive",
        "node_name",
        "host",
        "pid",
        "mode",
        "transport",
        "heartbeat_age",
        "claims_held",
        "counters",
        "started",
    )
    list_filter = (EngineAliveFilter, "mode", "transport")
    search_fields = ("engine_id", "node_name", "host")
    list_per_page = 50
    fields = (
        "engine_id",
        "alive",
        "node_name",
        "host",
        "pid",
        "mode",
        "pool",
        "transport",
        "started",
        "heartbeat",
        "heartbeat_age",
        "stopped",
        "claims_held",
        "counters_table",
    )
    readonly_fields = fields

    def get_queryset(self, request: HttpRequest) -> QuerySet[EngineRecord]:
        held = (
            WorkflowClaim.objects.filter(engine_id=OuterRef("engine_id"))
            .order_by()
            .values("engine_id")
            .annotate(n=Count("pk"))
            .values("n")
        )
        return (
            super()
            .get_queryset(request)
            .annotate(_claims_held=Coalesce(Subquery(held, output_field=IntegerField()), Value(0)))
        )

    @admin.display(description="alive", boolean=True)
    def alive(self, record: EngineRecord) -> bool:
        return engine_is_alive(record, wall_ms(), alive_window_ms())

    @admin.display(description="heartbeat age", ordering="-heartbeat_at")
    def heartbeat_age(self, record: EngineRecord) -> str:
        return format_age((wall_ms() - record.heartbeat_at) / 1000)

    @admin.display(description="claims held", ordering="_claims_held")
    def claims_held(self, record: EngineRecord) -> int:
        return int(getattr(record, "_claims_held", 0) or 0)

    @admin.display(description="claim attempts")
    def counters(self, record: EngineRecord) -> str:
        snap = _counters(record)
        return " · ".join(f"{o} {snap.attempts.get(o, 0)}" for o in CLAIM_ATTEMPT_OUTCOMES)

    @admin.display(description="started", ordering="started_at")
    def started(self, record: EngineRecord) -> str:
        return format_ms(record.started_at)

    @admin.display(description="heartbeat")
    def heartbeat(self, record: EngineRecord) -> str:
        return format_ms(record.heartbeat_at)

    @admin.display(description="stopped")
    def stopped(self, record: EngineRecord) -> str:
        return format_ms(record.stopped_at)

    @admin.display(description="counters (at last heartbeat)")
    def counters_table(self, record: EngineRecord) -> str:
        snap = _counters(record)
        return render_to_string(
            "admin/weft/includes/counters.html",
            {
                "attempts": [(o, snap.attempts.get(o, 0)) for o in CLAIM_ATTEMPT_OUTCOMES],
                "active_claims": snap.active_claims,
                "renewal_failures": snap.renewal_failures,
                "wakes": [
                    {"kind": k, "decision": d, "transport": t, "count": n}
                    for (k, d, t), n in sorted(snap.wakes.items())
                ],
            },
        )


# -- the rest: read-only ----------------------------------------------------------


@admin.register(OwnershipModeMarker)
class OwnershipModeMarkerAdmin(ReadOnlyAdmin):
    """The store-wide mode marker; deleting it is ``weft_reset_mode``'s job."""

    list_display = ("mode", "established")
    fields = ("key", "mode", "established")
    readonly_fields = fields

    @admin.display(description="established at", ordering="established_at")
    def established(self, marker: OwnershipModeMarker) -> str:
        return format_ms(marker.established_at)


@admin.register(GlobalLease)
class GlobalLeaseAdmin(ReadOnlyAdmin):
    """The ``lease`` mode singleton."""

    list_display = ("key", "epoch", "holder_id", "expires")
    fields = ("key", "epoch", "holder_id", "expires")
    readonly_fields = fields

    @admin.display(description="expires at", ordering="expires_at")
    def expires(self, lease: GlobalLease) -> str:
        return format_ms(lease.expires_at)


@admin.register(ClaimEvent)
class ClaimEventAdmin(ReadOnlyAdmin):
    """The append-only claim history across every workflow."""

    list_display = ("id", "workflow_id", "kind", "epoch", "engine_id", "at", "reason")
    list_filter = ("kind",)
    search_fields = ("workflow_id", "engine_id")
    ordering = ("-id",)
    list_per_page = 100
    fields = (
        "workflow_id",
        "kind",
        "epoch",
        "engine_id",
        "at",
        "reason",
        "previous_engine_id",
        "previous_expires",
    )
    readonly_fields = fields

    @admin.display(description="at", ordering="at_ms")
    def at(self, event: ClaimEvent) -> str:
        return format_ms(event.at_ms)

    @admin.display(description="previous holder expired at")
    def previous_expires(self, event: ClaimEvent) -> str:
        return format_ms(event.previous_expires_at)
