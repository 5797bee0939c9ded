"""An activity attempt a turn started and has not committed yet.

On its own so that the turn's state (``commit``) can hold its running
attempts without importing the step that starts them (``activity``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from weft_django.engine.activities.executor import Attempt
from weft_django.engine.replay.machine import Leaf
from weft_django.engine.workflow.activity_definition import ActivityDefinition

OnSuccess = Callable[[Any], bool]
"""Called with an attempt's (normalized) value instead of settling the leaf."""


@dataclass
class PendingAttempt:
    """An attempt the turn started and has not committed yet."""

    leaf: Leaf
    definition: ActivityDefinition
    number: int
    handle: Attempt
    on_success: OnSuccess | None = None
    secret: str | None = None
    #: ``time.monotonic()`` at submit: an attempt's duration runs from here.
    submitted: float = field(default_factory=time.monotonic)
    #: Engine clock, ms: its started marker's instant (``None``: it has none).
    started_ms: int | None = None


__all__ = ["OnSuccess", "PendingAttempt"]
