"""The one home of the read rules: "latest run", "live", "drivable", "alive",
"expired", "due" (SPEC §4.4, §4.8).

The admin, the API, ``weft_status``, ``/metrics`` and the engine all ask a manager
(``WorkflowRun.objects.live()``, ``WorkflowClaim.objects.expired(now, grace_ms)``, ...)
instead of writing these filters themselves, so every reader agrees (an engine is "alive"
by one window, a claim "expired" by one rule) and a rule changes in one place or not at
all.

Times are integer milliseconds of the engine clock, passed in by the caller
(the read model judges them against ``kernel.clock.now_ms()``); nothing here reads
a clock. Models are reached through ``self.model`` and the app registry, so
``models`` can attach these as managers without an import cycle.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from django.db import models
from django.db.models import (
    BigIntegerField,
    BooleanField,
    Case,
    CharField,
    Count,
    Exists,
    F,
    IntegerField,
    OuterRef,
    Q,
    Subquery,
    Value,
    When,
)
from django.db.models.functions import Coalesce

from weft_django.models.choices import DRIVABLE_STATUSES, LIVE_STATUSES, TERMINAL_STATUSES

if TYPE_CHECKING:
    from weft_django.conf import WeftSettings

ALIVE_HEARTBEAT_MULTIPLIER: Final = 3
"""An engine is alive while its last heartbeat is younger than this many
``CLAIM_RENEW_INTERVAL`` s (it heartbeats once per interval) and it has not
marked itself stopped."""

#: The annotations ``WorkflowRunQuerySet.with_claim()`` adds, by claim column.
CLAIM_ANNOTATIONS: Final[dict[str, str]] = {
    "claim_engine_id": "engine_id",
    "claim_epoch": "epoch",
    "claim_expires_at": "expires_at",
}


def alive_window_ms(settings: WeftSettings | None = None) -> int:
    """How recent a heartbeat must be for its engine to count as alive."""
    if settings is None:
        from weft_django.conf import get_settings  # conf imports nothing of weft

        settings = get_settings()
    return ALIVE_HEARTBEAT_MULTIPLIER * settings.claim_renew_interval_ms


def _claim_model(queryset: models.QuerySet[Any]) -> type[models.Model]:
    return queryset.model._meta.apps.get_model("weft", "WorkflowClaim")


def _released_q() -> Q:
    return Q(engine_id__isnull=True, expires_at__isnull=True, claimed_at__isnull=True)


def corrupt_claims_q() -> Q:
    """A holder that does not decode: half-null, an empty engine id, or epoch < 1
    (released rows included: every column null). The condition of the partial
    index ``weft_claim_odd_idx``: keep the two in step."""
    return (
        Q(engine_id__isnull=True)
        | Q(engine_id="")
        | Q(expires_at__isnull=True)
        | Q(claimed_at__isnull=True)
        | Q(epoch__lt=1)
    )


def expired_claims_q(now_ms: int, grace_ms: int) -> Q:
    """A present holder that is corrupt or past ``expires_at + grace`` (takeover-eligible).

    The database twin of ``ownership.transitions.is_claim_expired`` applied to a
    decoded holder, with a corrupt holder expired, because engines take it over
    at once. Holder columns present but outside the codec's ranges are the one
    case the twins may differ; such rows are corrupt either way.
    """
    return ~_released_q() & (corrupt_claims_q() | Q(expires_at__lt=now_ms - grace_ms))


def held_claims_q() -> Q:
    """A claim row naming an engine (whatever its expiry): what "claims held" counts."""
    return Q(engine_id__isnull=False) & ~Q(engine_id="")


def out_of_backoff_q(now_ms: int) -> Q:
    """No failed turn's backoff pending at ``now_ms`` (``engine.turn_failures``):
    the runs the maintenance pass and the Celery stranded finder may drive."""
    return Q(turn_retry_at__isnull=True) | Q(turn_retry_at__lte=now_ms)


def owes_turn_q(now_ms: int) -> Q:
    """Runs that need a turn now: ``running`` (a turn under way or owed), or
    ``parked`` with a wake since it parked (``wake_seq > parked_seq``: a
    signal, a completion, a cancel request) or a timer due (``wake_at``).
    What a Celery node counts as the turns it owes (``CeleryNodeScheduler``)."""
    woken = Q(wake_seq__gt=F("parked_seq")) | Q(wake_at__lte=now_ms)
    return Q(status="running") | (Q(status="parked") & woken)


def in_backoff(turn_retry_at: int | None, now_ms: int) -> bool:
    """The Python twin of ``out_of_backoff_q``, negated (``Engine.drive``'s check)."""
    return turn_retry_at is not None and turn_retry_at > now_ms


def alive_engines_q(now_ms: int, window_ms: int) -> Q:
    """Not stopped, and the heartbeat is within ``window_ms`` of ``now_ms``."""
    return Q(stopped_at__isnull=True, heartbeat_at__gte=now_ms - window_ms)


class WorkflowRunQuerySet(models.QuerySet):
    """Runs: the status groups, the latest run of an id, the claim beside it."""

    def latest_for(self, workflow_id: str) -> Any:
        """The newest run of ``workflow_id`` (``None`` when it has none).

        Newest by ``created_at``; on a tie (two runs in the same microsecond,
        as a continue-as-new can produce on a coarse clock) the higher pk, so
        every reader picks the same run.
        """
        return self.filter(workflow_id=workflow_id).order_by("-created_at", "-pk").first()

    def live(self) -> WorkflowRunQuerySet:
        """pending, running, parked or suspended: at most one per workflow id."""
        return self.filter(status__in=LIVE_STATUSES)

    def drivable(self) -> WorkflowRunQuerySet:
        """running or parked: the runs an owner drives."""
        return self.filter(status__in=DRIVABLE_STATUSES)

    def terminal(self) -> WorkflowRunQuerySet:
        return self.filter(status__in=TERMINAL_STATUSES)

    def out_of_backoff(self, now_ms: int) -> WorkflowRunQuerySet:
        """Runs not waiting out a failed turn's backoff (``out_of_backoff_q``)."""
        return self.filter(out_of_backoff_q(now_ms))

    def with_claim(self) -> WorkflowRunQuerySet:
        """Annotate the claim of each run's workflow id (``claim_engine_id``,
        ``claim_epoch``, ``claim_expires_at``; ``None`` when never claimed).

        The claim is keyed by workflow id, not a foreign key (it outlives every
        run), so it is joined by correlated subqueries.
        """
        claims = _claim_model(self)._default_manager.filter(workflow_id=OuterRef("workflow_id"))
        return self.annotate(
            **{
                name: Subquery(claims.values(column)[:1])
                for name, column in CLAIM_ANNOTATIONS.items()
            }
        )

    def owned_by(self, engine_id: str) -> WorkflowRunQuerySet:
        """Runs whose workflow id's claim names ``engine_id`` as its holder."""
        claims = _claim_model(self)._default_manager.filter(
            workflow_id=OuterRef("workflow_id"), engine_id=engine_id
        )
        return self.filter(Exists(claims))


class WorkflowClaimQuerySet(models.QuerySet):
    """Claims: released, live, expired (the takeover judgement), held by an engine."""

    def released(self) -> WorkflowClaimQuerySet:
        """No holder at all (the three holder columns null)."""
        return self.filter(_released_q())

    def expired(self, now_ms: int, grace_ms: int) -> WorkflowClaimQuerySet:
        """Holders another engine may take over now (``expired_claims_q``)."""
        return self.filter(expired_claims_q(now_ms, grace_ms))

    def takeable(self, now_ms: int, grace_ms: int) -> WorkflowClaimQuerySet:
        """Claims another engine may take now: released (acquire) or expired
        (takeover). What the reclaim scan looks for."""
        return self.filter(_released_q() | expired_claims_q(now_ms, grace_ms))

    def live(self, now_ms: int, grace_ms: int) -> WorkflowClaimQuerySet:
        """Holders that are neither released nor expired."""
        return self.exclude(_released_q()).exclude(expired_claims_q(now_ms, grace_ms))

    def with_state(self, now_ms: int, grace_ms: int) -> WorkflowClaimQuerySet:
        """Annotate ``state`` (``released`` / ``expired`` / ``live``, by the filters
        above) and ``expires_in_ms`` (``expires_at - now``; ``None`` without one)."""
        return self.annotate(
            state=Case(
                When(_released_q(), then=Value("released")),
                When(expired_claims_q(now_ms, grace_ms), then=Value("expired")),
                default=Value("live"),
                output_field=CharField(),
            ),
            expires_in_ms=F("expires_at") - Value(now_ms, output_field=BigIntegerField()),
        )

    def held_by(self, engine_id: str) -> WorkflowClaimQuerySet:
        return self.filter(engine_id=engine_id)

    def held(self) -> WorkflowClaimQuerySet:
        """Rows naming an engine (``held_claims_q``)."""
        return self.filter(held_claims_q())


class EngineRecordQuerySet(models.QuerySet):
    """Engine boots: alive or not, and the claims each holds."""

    def alive(self, now_ms: int, settings: WeftSettings | None = None) -> EngineRecordQuerySet:
        """Not stopped, heartbeat within ``alive_window_ms(settings)``."""
        return self.filter(alive_engines_q(now_ms, alive_window_ms(settings)))

    def not_alive(self, now_ms: int, settings: WeftSettings | None = None) -> EngineRecordQuerySet:
        return self.exclude(alive_engines_q(now_ms, alive_window_ms(settings)))

    def with_liveness(
        self, now_ms: int, settings: WeftSettings | None = None
    ) -> EngineRecordQuerySet:
        """Annotate ``alive`` (the filter above) and ``heartbeat_age_ms``."""
        alive = alive_engines_q(now_ms, alive_window_ms(settings))
        return self.annotate(
            alive=Case(
                When(alive, then=Value(True)), default=Value(False), output_field=BooleanField()
            ),
            heartbeat_age_ms=Value(now_ms, output_field=BigIntegerField()) - F("heartbeat_at"),
        )

    def with_claims_held(self) -> EngineRecordQuerySet:
        """Annotate ``claims_held``: claim rows naming the engine (0 for none)."""
        held = (
            _claim_model(self)
            ._default_manager.filter(engine_id=OuterRef("engine_id"))
            .order_by()
            .values("engine_id")
            .annotate(n=Count("pk"))
            .values("n")[:1]
        )
        return self.annotate(
            claims_held=Coalesce(Subquery(held, output_field=IntegerField()), Value(0))
        )


class TimerQuerySet(models.QuerySet):
    def due(self, now_ms: int) -> TimerQuerySet:
        """Timers at or past ``fire_at`` whose run is running or parked.

        A timer of a pending, suspended or terminal run is not due: nobody
        should fire it (pickup, resume or purge deal with those runs).
        """
        return self.filter(fire_at__lte=now_ms, run__status__in=DRIVABLE_STATUSES)


__all__ = [
    "ALIVE_HEARTBEAT_MULTIPLIER",
    "CLAIM_ANNOTATIONS",
    "EngineRecordQuerySet",
    "TimerQuerySet",
    "WorkflowClaimQuerySet",
    "WorkflowRunQuerySet",
    "alive_engines_q",
    "alive_window_ms",
    "expired_claims_q",
    "held_claims_q",
    "in_backoff",
    "out_of_backoff_q",
    "owes_turn_q",
]
