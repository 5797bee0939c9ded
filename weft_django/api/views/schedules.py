"""``schedules/``: list, create, describe, update, delete, pause, resume, trigger, backfill.

Thin like every weft view (``base``): the body is validated by a serializer,
then ONE client call (``client.create_schedule`` ...) does the work -- the
same validation as from Python (``schedule_spec.build_spec``), so a bad
cron, an unknown timezone or workflow is a 400 naming the value and writes
nothing. Durations in bodies are seconds; instants ISO 8601 with a zone.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.urls import URLPattern, path
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from weft_django import client
from weft_django.api.schema import ERR_400, ERR_409, ERR_AUTH, ERR_PAGE, error
from weft_django.api.serializers.fields import JSONPayloadField, StrictCharField
from weft_django.engine.schedules.rows import summary
from weft_django.errors import WeftError
from weft_django.kernel.schedule_spec import OVERLAP_POLICIES
from weft_django.models import Schedule

from .base import WeftAPIView, bad_arguments, db, validated

SCHEDULE_TAG = ["schedules"]
ERR_404 = error("No such schedule (code schedule_not_found).")


class ScheduleFieldsSerializer(serializers.Serializer):
    """The fields of `client.update_schedule` (all optional)."""

    workflow = StrictCharField(max_length=200, required=False)
    input = JSONPayloadField(what="schedule input", required=False, allow_null=True)
    cron = StrictCharField(max_length=200, required=False, allow_null=True)
    every = serializers.FloatField(required=False, allow_null=True, help_text="Seconds.")
    timezone = StrictCharField(max_length=64, required=False)
    overlap = serializers.ChoiceField(choices=list(OVERLAP_POLICIES), required=False)
    catchup_window = serializers.FloatField(required=False, min_value=0, help_text="Seconds.")
    jitter = serializers.FloatField(
        required=False, allow_null=True, min_value=0, help_text="Seconds."
    )
    start_at = serializers.DateTimeField(required=False, allow_null=True)
    end_at = serializers.DateTimeField(required=False, allow_null=True)
    paused = serializers.BooleanField(required=False)


class CreateScheduleSerializer(ScheduleFieldsSerializer):
    """The arguments of `client.create_schedule`."""

    schedule_id = StrictCharField(max_length=160)
    workflow = StrictCharField(max_length=200)


class BackfillSerializer(serializers.Serializer):
    start = serializers.DateTimeField()
    end = serializers.DateTimeField()


class ScheduleSerializer(serializers.Serializer):
    """A schedule as `client.list_schedules` shows it (`calls.summary`)."""

    schedule_id = serializers.CharField()
    workflow = serializers.CharField()
    input = serializers.JSONField(allow_null=True)
    cron = serializers.CharField(allow_null=True)
    every_s = serializers.FloatField(allow_null=True)
    timezone = serializers.CharField()
    overlap = serializers.ChoiceField(choices=list(OVERLAP_POLICIES))
    catchup_window_s = serializers.FloatField()
    jitter_s = serializers.FloatField(allow_null=True)
    start_at = serializers.CharField(allow_null=True)
    end_at = serializers.CharField(allow_null=True)
    paused = serializers.BooleanField()
    declared = serializers.BooleanField(help_text='Declared in WEFT["SCHEDULES"].')
    version = serializers.IntegerField()
    next_fire_at = serializers.CharField(allow_null=True)
    next_fire_times = serializers.ListField(child=serializers.CharField())
    last_tick_at = serializers.CharField(allow_null=True)
    ticks = serializers.DictField(
        child=serializers.IntegerField(), help_text="Tick counts by outcome."
    )

    def to_representation(self, instance: Any) -> Any:
        return instance if isinstance(instance, dict) else summary(instance)


class RecentRunSerializer(serializers.Serializer):
    workflow_id = serializers.CharField()
    run_id = serializers.UUIDField()
    status = serializers.CharField()
    created_at = serializers.CharField(allow_null=True)


class DriverSerializer(serializers.Serializer):
    workflow_id = serializers.CharField()
    status = serializers.CharField(allow_null=True)


class ScheduleDetailSerializer(ScheduleSerializer):
    """`client.describe_schedule`: the next five fire times, recent runs, the driver."""

    recent_runs = RecentRunSerializer(many=True)
    driver = DriverSerializer()


class RunRefSerializer(serializers.Serializer):
    workflow_id = serializers.CharField()
    run_id = serializers.UUIDField()


class DeletedSerializer(serializers.Serializer):
    schedule_id = serializers.CharField()
    deleted = serializers.BooleanField()


class BackfillResultSerializer(serializers.Serializer):
    runs = RunRefSerializer(many=True)


def _call(fn: Callable[[], Any]) -> Any:
    """The client's plain ``ValueError``/``TypeError`` is a 400 naming the value."""
    try:
        return fn()
    except WeftError:
        raise
    except (TypeError, ValueError) as exc:
        raise bad_arguments(exc) from None


class ScheduleListView(WeftAPIView):
    """``schedules/``."""

    @extend_schema(
        operation_id="weft_schedules_list",
        tags=SCHEDULE_TAG,
        summary="List schedules",
        responses={200: ScheduleSerializer(many=True), **ERR_AUTH, 404: ERR_PAGE},
    )
    def get(self, request: Request) -> Response:
        return self.page(Schedule.objects.using(db()).order_by("schedule_id"), ScheduleSerializer)

    @extend_schema(
        operation_id="weft_schedules_create",
        tags=SCHEDULE_TAG,
        summary="Create a schedule",
        description="Exactly one of cron (5 fields) and every (seconds). A bad value → 400 "
        "naming it, nothing written; an existing id → 409 schedule_already_exists.",
        request=CreateScheduleSerializer,
        responses={201: ScheduleDetailSerializer, 400: ERR_400, **ERR_AUTH, 409: ERR_409},
    )
    def post(self, request: Request) -> Response:
        data = validated(CreateScheduleSerializer, request.data)
        sid, workflow = data.pop("schedule_id"), data.pop("workflow")
        body = _call(lambda: client.create_schedule(sid, workflow, **data))
        return Response(body, status=201)


class ScheduleDetailView(WeftAPIView):
    """``schedules/<id>/``."""

    @extend_schema(
        operation_id="weft_schedules_describe",
        tags=SCHEDULE_TAG,
        summary="Describe a schedule: next fire times, tick counts, recent runs",
        responses={200: ScheduleDetailSerializer, **ERR_AUTH, 404: ERR_404},
    )
    def get(self, request: Request, schedule_id: str) -> Response:
        return Response(_call(lambda: client.describe_schedule(schedule_id)))

    @extend_schema(
        operation_id="weft_schedules_update",
        tags=SCHEDULE_TAG,
        summary="Change some fields of a schedule",
        request=ScheduleFieldsSerializer,
        responses={200: ScheduleDetailSerializer, 400: ERR_400, **ERR_AUTH, 404: ERR_404},
    )
    def patch(self, request: Request, schedule_id: str) -> Response:
        data = validated(ScheduleFieldsSerializer, request.data)
        return Response(_call(lambda: client.update_schedule(schedule_id, **data)))

    @extend_schema(
        operation_id="weft_schedules_delete",
        tags=SCHEDULE_TAG,
        summary="Delete a schedule (its runs stay)",
        responses={200: DeletedSerializer, **ERR_AUTH, 404: ERR_404},
    )
    def delete(self, request: Request, schedule_id: str) -> Response:
        _call(lambda: client.delete_schedule(schedule_id))
        return Response({"schedule_id": schedule_id, "deleted": True})


def _action(
    name: str, summary_text: str, fn: Callable[[str], Any], ok: Any, status: int = 200
) -> type[WeftAPIView]:
    @extend_schema(
        operation_id=f"weft_schedules_{name}",
        tags=SCHEDULE_TAG,
        summary=summary_text,
        request=None,
        responses={status: ok, **ERR_AUTH, 404: ERR_404},
    )
    def post(self: WeftAPIView, request: Request, schedule_id: str) -> Response:
        return Response(_call(lambda: fn(schedule_id)), status=status)

    return type(f"Schedule{name.title()}View", (WeftAPIView,), {"post": post})


def _trigger(schedule_id: str) -> dict[str, str]:
    handle = client.trigger_schedule(schedule_id)
    return {"workflow_id": handle.workflow_id, "run_id": handle.run_id}


SchedulePauseView = _action("pause", "Pause a schedule", client.pause_schedule, ScheduleSerializer)
ScheduleResumeView = _action(
    "resume", "Resume a schedule", client.resume_schedule, ScheduleDetailSerializer
)
ScheduleTriggerView = _action(
    "trigger", "Start one run of a schedule now", _trigger, RunRefSerializer, status=201
)


class ScheduleBackfillView(WeftAPIView):
    """``schedules/<id>/backfill/``."""

    @extend_schema(
        operation_id="weft_schedules_backfill",
        tags=SCHEDULE_TAG,
        summary="Start the run of every tick in [start, end] that has none yet",
        request=BackfillSerializer,
        responses={201: BackfillResultSerializer, 400: ERR_400, **ERR_AUTH, 404: ERR_404},
    )
    def post(self, request: Request, schedule_id: str) -> Response:
        data = validated(BackfillSerializer, request.data)
        handles = _call(lambda: client.backfill_schedule(schedule_id, data["start"], data["end"]))
        runs = [{"workflow_id": h.workflow_id, "run_id": h.run_id} for h in handles]
        return Response({"runs": runs}, status=201)


def schedule_urls(prefix: str) -> list[URLPattern]:
    """The routes, for ``api.urls`` (``prefix``: the detail path, with the id converter)."""
    return [
        path("schedules/", ScheduleListView.as_view(), name="schedule-list"),
        path(prefix, ScheduleDetailView.as_view(), name="schedule-detail"),
        path(prefix + "pause/", SchedulePauseView.as_view(), name="schedule-pause"),
        path(prefix + "resume/", ScheduleResumeView.as_view(), name="schedule-resume"),
        path(prefix + "trigger/", ScheduleTriggerView.as_view(), name="schedule-trigger"),
        path(prefix + "backfill/", ScheduleBackfillView.as_view(), name="schedule-backfill"),
    ]


__all__ = [
    "ScheduleBackfillView",
    "ScheduleDetailView",
    "ScheduleListView",
    "SchedulePauseView",
    "ScheduleResumeView",
    "ScheduleTriggerView",
    "schedule_urls",
]
