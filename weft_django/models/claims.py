"""The claim protocol's rows: the per-workflow claim, its event log, the mode marker
and the global lease.

Invariants: ``WorkflowClaim`` is keyed by the workflow id, not a foreign key: it
outlives every run of that id (never deleted), so the epoch sequence is never reset
and an old wake can never match a new generation (ABA). Holder columns are typed and
nullable; the holder is "absent" only when all three are null, and a half-null row is
corrupt and decodes to nothing. Timestamps are integer milliseconds of the engine
clock; singletons are ensured-then-locked (no data migration).
"""

from __future__ import annotations

from django.db import models

from weft_django.models.choices import (
    ClaimEventKind,
)
from weft_django.models.querysets import (
    WorkflowClaimQuerySet,
    corrupt_claims_q,
)


class WorkflowClaim(models.Model):
    """A workflow id's ownership record; the row is the per-workflow mutex."""

    workflow_id = models.CharField(max_length=200, primary_key=True)
    epoch = models.BigIntegerField(default=0, help_text="0 = never claimed")
    # Indexed with the workflow id (``weft_claim_engine_idx``), not alone.
    engine_id = models.CharField(max_length=200, null=True, blank=True)
    expires_at = models.BigIntegerField(null=True, blank=True, help_text="engine clock, ms")
    claimed_at = models.BigIntegerField(null=True, blank=True, help_text="engine clock, ms")

    objects = WorkflowClaimQuerySet.as_manager()

    class Meta:
        verbose_name = "holder"
        verbose_name_plural = "holders"
        indexes = [
            models.Index(fields=["expires_at"], name="weft_claim_expires_idx"),
            # One engine's claims (scope "engine" renewal, the owned-runs scope)
            # and, in workflow-id order, a capped count of them (``weft_status``,
            # ``/metrics``) that reads no more than its cap of index entries.
            models.Index(fields=["engine_id", "workflow_id"], name="weft_claim_engine_idx"),
            # The reclaim scan and the expired-claims count look for released or
            # corrupt holders; in a healthy cluster they are few among every
            # workflow's claim, so a partial index finds them without a table scan.
            models.Index(
                fields=["workflow_id"], condition=corrupt_claims_q(), name="weft_claim_odd_idx"
            ),
        ]

    def __str__(self) -> str:
        holder = self.engine_id or "-"
        return f"{self.workflow_id} @ epoch {self.epoch} held by {holder}"


class ClaimEvent(models.Model):
    """Append-only history of claim transitions, written in the same batch."""

    workflow_id = models.CharField(max_length=200, db_index=True)
    epoch = models.BigIntegerField()
    engine_id = models.CharField(max_length=200, blank=True, default="")
    kind = models.CharField(max_length=16, choices=ClaimEventKind.choices)
    at_ms = models.BigIntegerField()
    reason = models.CharField(max_length=200, blank=True, default="")
    # The holder that was replaced (takeover, rotation): kept so safety can be
    # checked from records alone (a takeover's claimed_at > old expires_at + grace).
    previous_engine_id = models.CharField(max_length=200, blank=True, default="")
    previous_expires_at = models.BigIntegerField(null=True, blank=True)

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return f"{self.kind} {self.workflow_id} epoch {self.epoch} by {self.engine_id or '-'}"


class OwnershipModeMarker(models.Model):
    """Store-wide singleton: the fencing mode every engine must agree on."""

    key = models.CharField(max_length=16, primary_key=True, default="marker")
    mode = models.CharField(max_length=32)
    established_at = models.BigIntegerField()

    class Meta:
        verbose_name = "ownership mode marker"

    def __str__(self) -> str:
        return f"cluster mode {self.mode}"  # since when: the admin's column


class GlobalLease(models.Model):
    """The ``lease`` mode singleton, fenced on its epoch (SPEC §4.10)."""

    key = models.CharField(max_length=16, primary_key=True, default="lease")
    epoch = models.BigIntegerField(default=0)
    holder_id = models.CharField(max_length=200, null=True, blank=True)
    expires_at = models.BigIntegerField(null=True, blank=True)

    def __str__(self) -> str:
        return f"lease epoch {self.epoch} held by {self.holder_id or '-'}"
