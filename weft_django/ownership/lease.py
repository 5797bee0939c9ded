"""``lease`` mode (SPEC §4.10): one store-wide single-writer lease.

The same fencing idea at store scope: the lease row's epoch is the token,
every engine-owned write is conditioned on it, and a deposed holder halts
entirely (``WeftLeaseLostWarning``) instead of stopping one workflow. A
standby waits up to ``LEASE_WAIT_TIMEOUT`` for the holder to expire.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from weft_django.errors import EngineLeaseAcquisitionTimeoutError
from weft_django.kernel.vocab import LeaseLostReason
from weft_django.models import GlobalLease
from weft_django.ownership import WORKFLOW_CLAIM_TAKEOVER_GRACE_MULTIPLIER
from weft_django.ownership.batch import conditional_batch
from weft_django.ownership.codec import is_valid_epoch, is_valid_timestamp
from weft_django.ownership.ops import LeaseCondition, Update
from weft_django.ownership.transitions import next_epoch
from weft_django.warnings import warn_lease_lost


@dataclass(frozen=True)
class LeaseSnapshot:
    epoch: int
    holder_id: str | None
    expires_at: int | None

    @property
    def holder_live_possible(self) -> bool:
        """A holder that decodes (a garbage holder is stealable at once)."""
        # Epoch 0 means "never acquired": no engine writes a holder at it.
        return (
            bool(self.holder_id)
            and is_valid_timestamp(self.expires_at)
            and is_valid_epoch(self.epoch)
        )


class GlobalLeaseManager:
    """Acquire (with standby wait), renew, release the store-wide lease."""

    def __init__(
        self,
        *,
        holder_id: str,
        clock: Callable[[], int],
        ttl_ms: int,
        renew_interval_ms: int,
        wait_timeout_ms: int,
        using: str = "default",
        poll_interval_ms: int = 1000,
        sleep: Callable[[float], None] = time.sleep,
        on_lost: Callable[[str], None] | None = None,
    ) -> None:
        self.holder_id = holder_id
        self.clock = clock
        self.ttl_ms = ttl_ms
        self.renew_interval_ms = renew_interval_ms
        self.wait_timeout_ms = wait_timeout_ms
        self.using = using
        self.poll_interval_ms = poll_interval_ms
        self.sleep = sleep
        self.on_lost = on_lost
        self.epoch: int | None = None
        self.deposed = False
        self._lock = threading.Lock()

    def read(self) -> LeaseSnapshot:
        row = (
            GlobalLease.objects.using(self.using)
            .filter(pk="lease")
            .values_list("epoch", "holder_id", "expires_at")
            .first()
        )
        return LeaseSnapshot(*row) if row is not None else LeaseSnapshot(0, None, None)

    def is_expired(self, snapshot: LeaseSnapshot, now: int) -> bool:
        if snapshot.holder_id is None:
            return True
        if not snapshot.holder_live_possible:
            return True
        assert snapshot.expires_at is not None
        grace = WORKFLOW_CLAIM_TAKEOVER_GRACE_MULTIPLIER * self.renew_interval_ms
        return snapshot.expires_at + grace < now

    def try_acquire(self) -> bool:
        """One CAS attempt against the holder read; ``True`` when this engine holds it."""
        snapshot = self.read()
        now = self.clock()
        if not self.is_expired(snapshot, now):
            return False
        # From the stored epoch, never rewound; EpochExhaustedError when it cannot grow.
        epoch = next_epoch(snapshot.epoch)
        result = conditional_batch(
            [LeaseCondition(snapshot.epoch, snapshot.holder_id)],
            [
                Update(
                    GlobalLease,
                    {"pk": "lease"},
                    {"epoch": epoch, "holder_id": self.holder_id, "expires_at": now + self.ttl_ms},
                )
            ],
            using=self.using,
        )
        if result.committed:
            with self._lock:
                self.epoch = epoch
                self.deposed = False
        return result.committed

    def acquire(self) -> int:
        """Wait as a standby until the lease is ours, or time out."""
        started = self.clock()
        while True:
            if self.try_acquire():
                assert self.epoch is not None
                return self.epoch
            waited = self.clock() - started
            if waited >= self.wait_timeout_ms:
                raise EngineLeaseAcquisitionTimeoutError(waited, self.read().holder_id)
            self.sleep(self.poll_interval_ms / 1000)

    def renew_once(self) -> bool:
        """Extend the lease; a lost CAS deposes this engine (it halts)."""
        if self.epoch is None or self.deposed:
            return False
        result = conditional_batch(
            [LeaseCondition(self.epoch, self.holder_id)],
            [Update(GlobalLease, {"pk": "lease"}, {"expires_at": self.clock() + self.ttl_ms})],
            using=self.using,
        )
        if not result.committed:
            self.handle_deposition("deposed")
        return result.committed

    def release(self) -> bool:
        if self.epoch is None or self.deposed:
            return False
        result = conditional_batch(
            [LeaseCondition(self.epoch, self.holder_id)],
            [Update(GlobalLease, {"pk": "lease"}, {"holder_id": None, "expires_at": None})],
            using=self.using,
        )
        with self._lock:
            self.epoch = None
        return result.committed

    def handle_deposition(self, reason: LeaseLostReason = "deposed") -> None:
        """Idempotent: mark deposed, warn once, tell the engine to halt."""
        with self._lock:
            if self.deposed:
                return
            self.deposed = True
        warn_lease_lost(self.holder_id, reason, epoch=self.epoch)
        if self.on_lost is not None:
            self.on_lost(reason)
