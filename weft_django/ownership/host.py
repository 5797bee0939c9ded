"""``OwnershipHost``: the little the claim protocol needs from an engine.

The ownership package must never import the runtime above it; the engine
(and the tests) satisfy this protocol instead.
"""

from __future__ import annotations

from typing import Protocol

from weft_django.conf import OwnershipMode, WeftSettings
from weft_django.ownership.lease import GlobalLeaseManager
from weft_django.ownership.metrics import ClaimMetrics
from weft_django.ownership.registry import ClaimRegistry


class OwnershipHost(Protocol):
    """An engine as the protocol sees it."""

    @property
    def engine_id(self) -> str: ...

    @property
    def ownership(self) -> OwnershipMode: ...

    @property
    def registry(self) -> ClaimRegistry | None: ...

    @property
    def lease(self) -> GlobalLeaseManager | None: ...

    @property
    def settings(self) -> WeftSettings: ...

    @property
    def metrics(self) -> ClaimMetrics: ...

    @property
    def uses_injected_clock(self) -> bool: ...

    def now_ms(self) -> int: ...
