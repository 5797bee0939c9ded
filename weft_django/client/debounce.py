"""``client.debounce``: many calls within a window start one run, with the last input.

Invariants: every argument is checked before anything is written (the
start's own options by ``client.start``'s checks); the write is the engine's
debounce (``engine.operations.debounce``: one lock per ``(workflow, key)``,
then the one start write or one conditional update of the burst's pending
run), so across processes a burst gives exactly one run.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from weft_django.client.aio import asyncify
from weft_django.client.handle import WorkflowHandle
from weft_django.client.start import _checked
from weft_django.engine import tracing
from weft_django.engine.operations import debounce as debouncing
from weft_django.errors import InvalidArgumentError
from weft_django.kernel.durations import to_ms
from weft_django.kernel.ids import is_storable_text

#: ``client.start`` options a debounce passes on; the others (``workflow_id``,
#: ``start_at``, ``start_after``, ``on_conflict``, ``idempotency_key``) are the
#: debounce's own to decide.
START_OPTIONS = frozenset(
    {
        "execution_timeout",
        "queue",
        "priority",
        "concurrency_key",
        "fairness_key",
        "fairness_weight",
    }
)


def _duration(value: object, what: str) -> int:
    try:
        ms = to_ms(value, what, allow_zero=False)
    except (TypeError, ValueError, OverflowError) as exc:
        raise InvalidArgumentError(
            what, f"{what} must be a duration > 0, got {value!r:.100}"
        ) from exc
    if ms <= 0:
        raise InvalidArgumentError(what, f"{what} must be a duration > 0, got {value!r:.100}")
    return ms


def debounce(
    workflow: str,
    input: Any = None,
    *,
    key: str,
    period: timedelta | float,
    max_wait: timedelta | float | None = None,
    **start_options: Any,
) -> WorkflowHandle:
    """The handle of the one run this burst of ``(workflow, key)`` starts.

    A call within ``period`` of the last one for the same pair replaces the
    input and pushes the start back to ``period`` from now, never beyond
    ``max_wait`` after the burst's first call. ``start_options``: those of
    ``client.start`` listed in ``START_OPTIONS``."""
    if not isinstance(key, str) or not 0 < len(key) <= 200 or not is_storable_text(key):
        raise InvalidArgumentError(
            "key", f"debounce key must be a string of 1 to 200 characters, got {key!r:.300}"
        )
    period_ms = _duration(period, "period")
    max_wait_ms = None if max_wait is None else _duration(max_wait, "max_wait")
    if max_wait_ms is not None and max_wait_ms < period_ms:
        raise InvalidArgumentError(
            "max_wait",
            f"max_wait ({max_wait!r:.100}) must not be shorter than period ({period!r:.100})",
        )
    unknown = sorted(set(start_options) - START_OPTIONS)
    if unknown:
        raise InvalidArgumentError(
            unknown[0],
            f"debounce takes no start option {unknown[0]!r}; it takes: "
            f"{', '.join(sorted(START_OPTIONS))}",
        )
    with tracing.start_span(workflow, source="debounce", workflow_id=None) as span:
        new = _checked(
            workflow,
            input,
            workflow_id=debouncing.id_prefix(str(workflow), key) + "0",
            idempotency_key=None,
            start_after=None,
            start_at=None,
            execution_timeout=start_options.get("execution_timeout"),
            on_conflict="start-new",
            queue=start_options.get("queue"),
            priority=start_options.get("priority", 0),
            concurrency_key=start_options.get("concurrency_key"),
            fairness_key=start_options.get("fairness_key"),
            fairness_weight=start_options.get("fairness_weight"),
        )
        run = debouncing.debounce(new, key, period_ms, max_wait_ms)
        handle: WorkflowHandle[Any] = WorkflowHandle(run.workflow_id, str(run.pk))
        tracing.annotate(span, workflow_id=handle.workflow_id, run_id=handle.run_id)
        return handle


adebounce = asyncify(debounce)

__all__ = ["START_OPTIONS", "adebounce", "debounce"]
