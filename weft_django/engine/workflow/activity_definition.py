"""An activity's definition: what ``@activity`` decided about it once, at decoration
(``definitions.activity``), and the delay before each retry (``backoff_for``).

Invariant: a definition is frozen; the executor, the turn and the routed path read it
and never guess (whether the function is ``async def``, its retries, bounds and queue).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from weft_django.engine.workflow.payload_types import Rebuild

#: Delays are clamped here before any float arithmetic (2**53 ms is ~285,000
#: years), so a large attempt number cannot overflow the jitter's draw.
_MAX_DELAY_MS = 2**53


class UniformSource(Protocol):
    """What ``backoff_for`` draws jitter from: the ``random`` module or a ``Random``."""

    def uniform(self, a: float, b: float) -> float: ...


@dataclass(frozen=True)
class ActivityDefinition:
    """An activity: ordinary Python run by the owning engine, journaled.

    ``is_async``: ``fn`` is an ``async def`` function (awaited on the
    engine's event loop); otherwise it runs on an activity thread.
    ``heartbeat_timeout_ms``: an attempt that does not heartbeat for longer
    fails as timed out (``None``: no such bound). ``max_backoff_ms`` caps
    each retry delay (``None``: no cap); ``jitter`` (0..1) spreads each
    delay uniformly over ``[d*(1-jitter), d*(1+jitter)]``. ``atomic``: the
    body, its result's journal entry and the run's state commit in one
    transaction on the weft alias, under the claim fence (``engine.atomic``).
    """

    name: str
    fn: Callable[..., Any]
    retries: int = 0
    backoff_ms: int = 1000
    timeout_ms: int | None = None
    non_retryable: tuple[type[BaseException], ...] = ()
    is_async: bool = False
    heartbeat_timeout_ms: int | None = None
    max_backoff_ms: int | None = None
    jitter: float = 0.0
    atomic: bool = False
    #: ``@activity(celery_queue=...)``: attempts run as Celery tasks on this
    #: queue (``engine.routing``); ``None``: on the owning engine's executor.
    celery_queue: str | None = None
    #: ``@activity(queue=...)``: each attempt holds a slot of this queue (``engine.queues``).
    queue: str | None = None
    #: How the stored result is rebuilt as the declared return type (``None``: as stored).
    result_rebuild: Rebuild | None = None

    def backoff_for(self, attempt: int, rng: UniformSource = random) -> int:
        """The delay in ms before ``attempt`` (2, 3, ...).

        Exponential, base × 2^(attempt-2); then the jitter draw from ``rng``
        (uniform over ``[d*(1-jitter), d*(1+jitter)]``); then the
        ``max_backoff_ms`` cap. Never negative.
        """
        delay = min(self.backoff_ms * (2 ** max(0, attempt - 2)), _MAX_DELAY_MS)
        if self.jitter:
            low, high = delay * (1 - self.jitter), delay * (1 + self.jitter)
            delay = max(0, round(rng.uniform(low, high)))
        if self.max_backoff_ms is not None:
            delay = min(delay, self.max_backoff_ms)
        return delay


__all__ = ["ActivityDefinition", "UniformSource"]
