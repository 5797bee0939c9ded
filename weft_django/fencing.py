"""Fencing tokens for the application's own tables: ``fenced_update``.

Why: a plain (non-atomic) activity is at-least-once, and an engine that
stalled past its claim's expiry may still be running one when another engine
has taken the workflow over at a newer epoch and run the same step again.
weft's own state is safe -- every write of it is conditioned on the claim
epoch -- but the activity's writes to the application's rows are not: the
stale owner's late ``UPDATE`` would overwrite the new owner's value. This
module gives those rows the same protection, the classic fencing token:

* ``FencedModel``, an abstract mixin, stores on each row the fence of the
  last write through ``fenced_update``: ``fence_workflow_id`` and
  ``fence_epoch`` (``""`` / ``0``: never fenced).
* ``fenced_update(target, **values)`` is ONE conditional ``UPDATE``: it
  applies ``values`` and stores the caller's fence on the rows where the
  stored fence is not newer than the caller's --

      ``fence_workflow_id <> workflow_id OR fence_epoch <= epoch``

  -- and leaves the other rows untouched. No read precedes the write, so
  there is no window between a check and the write: on PostgreSQL a writer
  that waits on the row lock re-evaluates the condition on the row version
  the other writer committed; SQLite runs the statement under its one write
  lock. ``afenced_update`` is the same statement for ``async def``
  activities.

The invariant: once a row was written under epoch ``e`` of workflow ``W``,
no write under an epoch ``< e`` of ``W`` lands on it while ``W`` is the
row's last fenced writer. The caller's fence is the running attempt's
``activity_info()`` (``workflow_id``, ``epoch``: the claim epoch of the
engine running the attempt), or an explicit ``info=``.

What is defined, and why:

* the same epoch again (a retry, or a second write of the same attempt):
  applies -- the owner is still the owner;
* a newer epoch of the same workflow (the owner after a takeover): applies,
  and from then on the older epoch is refused;
* a row never fenced, or last fenced by another workflow: applies, and the
  row's fence becomes the caller's. Epochs of two workflows are not
  comparable (each workflow's claim counts on its own), so the row keeps
  one slot, the last writer's. A stale owner of ``W`` is therefore refused
  on a row only while ``W`` wrote it last: a row that many workflows update
  (a shared balance) is guarded against the last writer's stale owners
  only. Use ``@activity(atomic=True)`` for those, where available.

Not covered: an effect that happened *before* the takeover (the stale owner
wrote, then stalled before its result was journaled; the new owner runs the
step again and its write applies too) -- the token refuses late writes, it
does not deduplicate attempts (write idempotently: assign values, or key the
effect on ``activity_info().idempotency_key``). Outside services never see
the fence: hand them the idempotency key.
"""

from __future__ import annotations

from typing import Any, Literal, Protocol, TypeVar

from django.db import models
from django.db.models import Q

from weft_django.engine.activities.info import activity_info
from weft_django.errors import StaleFenceError

__all__ = [
    "FENCE_EPOCH_FIELD",
    "FENCE_WORKFLOW_FIELD",
    "FencedModel",
    "FencedQuerySet",
    "StaleFenceError",
    "afenced_update",
    "fenced_update",
]

FENCE_WORKFLOW_FIELD = "fence_workflow_id"
FENCE_EPOCH_FIELD = "fence_epoch"
_FENCE_FIELDS = (FENCE_WORKFLOW_FIELD, FENCE_EPOCH_FIELD)

OnStale = Literal["skip", "raise"]


class Fence(Protocol):
    """What the fence is read from: an ``ActivityInfo`` (or anything alike)."""

    @property
    def workflow_id(self) -> str: ...

    @property
    def epoch(self) -> int: ...


_M = TypeVar("_M", bound=models.Model)


class FencedQuerySet(models.QuerySet[_M]):
    """A queryset whose ``fenced_update(**values)`` is ``fenced_update(self, ...)``."""

    def fenced_update(
        self, *, info: Fence | None = None, on_stale: OnStale = "skip", **values: Any
    ) -> int:
        return fenced_update(self, info=info, on_stale=on_stale, **values)


class FencedModel(models.Model):
    """Abstract mixin: the fence of the last ``fenced_update`` of each row.

    ``fence_workflow_id``: the workflow whose activity wrote the row last
    through ``fenced_update`` (``""``: never). ``fence_epoch``: that writer's
    claim epoch (``0``: never). Write them only through ``fenced_update``:
    a plain ``save()`` is not fenced and writes back the fence the instance
    was loaded with (possibly an older one), so save such rows with
    ``update_fields`` that leave the fence fields out.
    """

    fence_workflow_id = models.CharField(max_length=200, blank=True, default="", editable=False)
    fence_epoch = models.BigIntegerField(default=0, editable=False)

    objects = FencedQuerySet.as_manager()

    class Meta:
        abstract = True


def fenced_update(
    target: models.Model | models.QuerySet[Any] | type[models.Model],
    *,
    info: Fence | None = None,
    on_stale: OnStale = "skip",
    **values: Any,
) -> int:
    """Apply ``values`` to ``target``'s rows unless a newer owner wrote them.

    ``target``: a model instance (its row, by primary key), a queryset, or a
    model class (all its rows). The model must have the fence fields (derive
    it from ``FencedModel``). ``values`` are what ``QuerySet.update`` takes
    (``F()`` expressions included); the fence fields are set by this call
    and may not be among them. ``info``: the writer's fence; default: the
    running activity's ``activity_info()``.

    Returns the number of rows written (for an instance, 1 or 0). The rows
    refused are those whose stored fence is newer; with
    ``on_stale="raise"``, refusing any of them raises ``StaleFenceError``
    (naming the first one) instead -- the write to the other rows stays
    applied, so prefer one row per call in that mode. An instance in memory
    is not changed: ``refresh_from_db()`` to see the stored values.

    Raises ``RuntimeError`` outside an activity without ``info``, and
    ``ValueError`` for an unusable fence (epoch 0: no claim epoch, as under
    ``OWNERSHIP="none"``) or bad arguments.
    """
    fence = _fence_of(info)
    queryset = _queryset_of(target)
    _check_fields(queryset.model, values)
    _check_on_stale(on_stale)
    workflow_id, epoch = fence.workflow_id, fence.epoch
    written = queryset.filter(_not_newer(workflow_id, epoch)).update(
        **values, **{FENCE_WORKFLOW_FIELD: workflow_id, FENCE_EPOCH_FIELD: epoch}
    )
    if on_stale == "raise" and not (isinstance(target, models.Model) and written):
        # Only to name what refused the write: the decision was the UPDATE's.
        stale = _stale_rows(queryset, workflow_id, epoch).first()
        if stale is not None:
            raise _stale_error(queryset, stale, workflow_id, epoch)
    return written


async def afenced_update(
    target: models.Model | models.QuerySet[Any] | type[models.Model],
    *,
    info: Fence | None = None,
    on_stale: OnStale = "skip",
    **values: Any,
) -> int:
    """``fenced_update`` for ``async def`` activities: the same ONE ``UPDATE``
    (``QuerySet.aupdate``), awaited; the fence is read before the first await,
    in the activity's own context."""
    fence = _fence_of(info)
    queryset = _queryset_of(target)
    _check_fields(queryset.model, values)
    _check_on_stale(on_stale)
    workflow_id, epoch = fence.workflow_id, fence.epoch
    written = await queryset.filter(_not_newer(workflow_id, epoch)).aupdate(
        **values, **{FENCE_WORKFLOW_FIELD: workflow_id, FENCE_EPOCH_FIELD: epoch}
    )
    if on_stale == "raise" and not (isinstance(target, models.Model) and written):
        stale = await _stale_rows(queryset, workflow_id, epoch).afirst()
        if stale is not None:
            raise _stale_error(queryset, stale, workflow_id, epoch)
    return written


def _not_newer(workflow_id: str, epoch: int) -> Q:
    """The fence condition: the stored fence is another workflow's, or not newer."""
    return ~Q(**{FENCE_WORKFLOW_FIELD: workflow_id}) | Q(**{f"{FENCE_EPOCH_FIELD}__lte": epoch})


def _stale_rows(queryset: models.QuerySet[Any], workflow_id: str, epoch: int) -> Any:
    return queryset.filter(
        **{FENCE_WORKFLOW_FIELD: workflow_id, f"{FENCE_EPOCH_FIELD}__gt": epoch}
    ).values_list("pk", FENCE_EPOCH_FIELD)


def _stale_error(
    queryset: models.QuerySet[Any], stale: tuple[Any, Any], workflow_id: str, epoch: int
) -> StaleFenceError:
    return StaleFenceError(queryset.model._meta.label, stale[0], workflow_id, epoch, int(stale[1]))


def _check_on_stale(on_stale: Any) -> None:
    if on_stale not in ("skip", "raise"):
        raise ValueError(f'on_stale must be "skip" or "raise", not {on_stale!r}')


def _fence_of(info: Fence | None) -> Fence:
    if info is None:
        try:
            info = activity_info()
        except RuntimeError:
            raise RuntimeError(
                "fenced_update() was called outside a running activity without info=: "
                "the fence is the running attempt's activity_info() (workflow_id, epoch); "
                "call it inside an @activity, or pass info= explicitly"
            ) from None
    workflow_id = getattr(info, "workflow_id", None)
    epoch = getattr(info, "epoch", None)
    if not isinstance(workflow_id, str) or not workflow_id:
        raise ValueError(f"fenced_update() needs a workflow id, got {workflow_id!r}")
    if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 1:
        raise ValueError(
            f"fenced_update() needs a claim epoch >= 1, got {epoch!r} for workflow "
            f'"{workflow_id}": the engine running the attempt held no claim epoch for it '
            '(OWNERSHIP="none" has no fencing token)'
        )
    return info


def _queryset_of(target: Any) -> models.QuerySet[Any]:
    if isinstance(target, models.QuerySet):
        return target
    if isinstance(target, models.Model):
        if target.pk is None:
            raise ValueError(
                f"fenced_update() got an unsaved {type(target).__name__} (pk is None): "
                "there is no row to update"
            )
        return type(target)._default_manager.filter(pk=target.pk)
    if isinstance(target, type) and issubclass(target, models.Model):
        return target._default_manager.all()
    raise TypeError(
        f"fenced_update() takes a model instance, a queryset or a model class, not {target!r}"
    )


def _check_fields(model: type[models.Model], values: dict[str, Any]) -> None:
    names = {f.name for f in model._meta.get_fields()}
    missing = [name for name in _FENCE_FIELDS if name not in names]
    if missing:
        raise TypeError(
            f"{model._meta.label} has no {', '.join(missing)} field: derive it from "
            "weft_django.fencing.FencedModel to use fenced_update()"
        )
    clashing = sorted(set(values) & set(_FENCE_FIELDS))
    if clashing:
        raise ValueError(
            f"fenced_update() sets {', '.join(clashing)} itself: leave it out of the values"
        )
    if not values:
        raise ValueError("fenced_update() needs at least one field to set")
