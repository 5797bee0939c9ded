"""Timers on Celery: a sleep becomes an ``eta`` message once due within the horizon.

Why: a node must not poll for every due timer, and a broker must not hold
a message for a sleep of days. A timer is handed to Celery once it is due
within ``CELERY_ETA_HORIZON``, and ``Timer.dispatched_at`` records that it
was (so it is sent once). It is sent again when it was sent before the
current claim (by a previous owner) or is still undriven although sent
(the message was lost, or is late behind a backlog): one renew interval
after it fell due, then after gaps that double with how overdue it was when
last sent (capped, ``redrive.CAP_INTERVALS``), so a node whose queue runs
late does not bury it under re-sends of the same timers.

Fencing exemption: ``Timer.dispatched_at`` is a scheduling mark, not
workflow state. It is written with plain ``.update()`` (a compare-and-set
on its own previous value), never through the fenced batch, and is never
part of a fence condition: a wrong stamp costs a duplicate or late message,
which the wake guard and the turn's fenced commit make harmless.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from django.db.models import (
    BigIntegerField,
    ExpressionWrapper,
    F,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Value,
)
from django.db.models.functions import Greatest, Least

from weft_django.kernel.vocab import timer_wake_kind
from weft_django.models import DRIVABLE_STATUSES, Timer, WorkflowClaim, WorkflowRun
from weft_django.transports.celery.messages import DriveMessage, send_drive
from weft_django.transports.celery.redrive import CAP_INTERVALS
from weft_django.transports.celery.turn_marks import BATCH

if TYPE_CHECKING:
    from weft_django.ownership.host import OwnershipHost

logger = logging.getLogger("weft_django.transports.celery")


def dispatch_timers(
    engine: OwnershipHost,
    runs: QuerySet[WorkflowRun],
    now: int,
    *,
    node_name: str,
    found_by_polling: bool,
) -> set[str]:
    """Hand this engine's timers due within the horizon to Celery, each once.

    Returns the runs sent for a turn now.
    """
    settings = engine.settings
    db = settings.database
    interval = settings.claim_renew_interval_ms
    claims = WorkflowClaim.objects.using(db).filter(workflow_id=OuterRef("run__workflow_id"))
    rows = (
        Timer.objects.using(db)
        .filter(
            run__in=runs.values("pk"),
            run__status__in=DRIVABLE_STATUSES,
            fire_at__lte=now + settings.celery_eta_horizon_ms,
        )
        .annotate(
            c_engine=Subquery(claims.values("engine_id")[:1]),
            c_epoch=Subquery(claims.values("epoch")[:1]),
            c_claimed=Subquery(claims.values("claimed_at")[:1]),
        )
        .filter(c_engine=engine.engine_id)
        .alias(
            # When a sent timer is re-sent: how overdue it was when last sent
            # after that (at least one interval, at most the cap).
            resend_at=ExpressionWrapper(
                F("dispatched_at")
                + Greatest(
                    Value(interval, output_field=BigIntegerField()),
                    Least(
                        F("dispatched_at") - F("fire_at"),
                        Value(interval * CAP_INTERVALS, output_field=BigIntegerField()),
                        output_field=BigIntegerField(),
                    ),
                    output_field=BigIntegerField(),
                ),
                output_field=BigIntegerField(),
            )
        )
        .filter(
            Q(dispatched_at__isnull=True)
            | Q(dispatched_at__lt=F("c_claimed"))
            | Q(fire_at__lte=now - interval, resend_at__lte=now)
        )
        .order_by("fire_at")
        .values_list("pk", "run_id", "kind", "fire_at", "dispatched_at", "c_epoch", "c_claimed")[
            : BATCH * 4
        ]
    )
    now_runs: set[str] = set()
    for pk, run_id, kind, fire_at, dispatched_at, epoch, claimed in rows:
        mark = Timer.objects.using(db).filter(pk=pk)
        mark = (
            mark.filter(dispatched_at__isnull=True)
            if dispatched_at is None
            else mark.filter(dispatched_at=dispatched_at)
        )
        if not mark.update(dispatched_at=now):
            continue  # someone else sent it meanwhile
        resend = dispatched_at is not None and claimed is not None and dispatched_at >= claimed
        via = "polling" if resend or (found_by_polling and fire_at <= now) else "celery"
        send_drive(
            DriveMessage(
                node_name,
                str(run_id),
                timer_wake_kind(kind),
                engine.engine_id,
                int(epoch),
                via=via,
                eta_ms=fire_at if fire_at > now else None,
                due_ms=fire_at,
            )
        )
        if fire_at <= now:
            now_runs.add(str(run_id))
    return now_runs


def after_turn(engine: OwnershipHost, workflow_id: str, *, node_name: str) -> None:
    """Timers the turn just wrote that are due within the horizon: hand them over."""
    runs = WorkflowRun.objects.using(engine.settings.database).filter(
        workflow_id=workflow_id, status__in=DRIVABLE_STATUSES
    )
    try:
        dispatch_timers(engine, runs, engine.now_ms(), node_name=node_name, found_by_polling=False)
    except Exception:  # the node's polling sends them
        logger.warning("could not hand the timers of %s over", workflow_id, exc_info=True)


__all__ = ["after_turn", "dispatch_timers"]
