"""Traces with OpenTelemetry (the ``otel`` extra).

The spans (names end with the workflow's or the activity's registered name):

* ``weft.start <workflow>`` (PRODUCER) in whoever starts a run --
  ``client.start``, ``signal_with_start``, a schedule's tick, and
  ``ctx.start_child`` (under the parent's turn: a child continues its
  parent's trace). Its context, as a W3C carrier, is the new run's
  ``WorkflowRun.trace_context``, written by the very insert that creates
  the run (the client's statement, or the parent's fenced batch): there is
  no second, unfenced write of it.
* ``weft.turn <workflow>`` (CONSUMER): one per turn, wherever the turn runs
  (``Turn.drive``, the one entry the polling engine and every Celery node
  use), with the run's stored context as its parent -- so a turn on another
  machine, after a Celery hop or a takeover, joins the caller's trace.
* ``weft.activity <activity>``: one per attempt, child of the turn that
  started it, current while the body runs (a thread, the executor's event
  loop, or the turn thread for an atomic one), ended when the outcome is
  known. A routed attempt's message carries its context, and the Celery
  worker that runs the body opens ``weft.routed_activity <activity>``
  (CONSUMER) under it.
* ``weft.run <workflow>``: emitted once, when a turn commits the run's end,
  from the run's ``created_at`` to now, under the start span -- one honest
  span for a run that lasted days, without keeping anything open between
  turns.

The invariant this module protects: **attributes are ids, names,
positions, attempts, epochs, statuses and exception types -- never a
payload, never an exception's message** (which may quote user data).
Failures set the span's status to ERROR with the exception's type as the
description and add an ``exception`` event carrying only ``exception.type``.
The stored carrier keeps the propagator's trace fields and drops
``baggage`` (the row keeps ids, not data).

Cost: with ``opentelemetry`` not importable (checked once, at import) or
``WEFT["TRACING"] = False``, every hook is a flag test and returns at once;
tracing never adds a database query -- the carrier rides on the run row
every path already loads.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import sys
from collections.abc import Iterator, Mapping
from typing import Any

from weft_django.conf import get_settings

try:  # the ``otel`` extra: opentelemetry-api
    from opentelemetry import propagate, trace
    from opentelemetry.trace import SpanKind, Status, StatusCode
except ImportError:  # pragma: no cover - exercised by the "no opentelemetry" test
    AVAILABLE = False
else:
    AVAILABLE = True

#: The instrumentation scope's name (``get_tracer``).
TRACER_NAME = "weft_django"

#: Carrier keys never stored on a run (user data may travel in baggage).
DROPPED_CARRIER_KEYS = frozenset({"baggage"})

_tracer: Any = None


def enabled() -> bool:
    """``opentelemetry`` is importable and ``WEFT["TRACING"]`` is on."""
    return AVAILABLE and get_settings().tracing


def _get_tracer() -> Any:
    """The tracer (a proxy until the application sets a provider: it follows then)."""
    global _tracer
    if _tracer is None:
        # The package's ``__version__`` without importing the package root
        # (an import cycle for ``devtools.check_cycles``): it is loaded already.
        version = getattr(sys.modules.get("weft_django"), "__version__", None)
        _tracer = trace.get_tracer(TRACER_NAME, version)
    return _tracer


def _parent(carrier: Any) -> Any:
    """The context a stored carrier names; ``None`` (the current one) without one."""
    if isinstance(carrier, dict) and carrier:
        return propagate.extract({str(k): str(v) for k, v in carrier.items()})
    return None


def _fail(span: Any, exc: BaseException) -> None:
    """ERROR status and an ``exception`` event naming only the exception's type."""
    kind = type(exc).__name__
    span.add_event("exception", {"exception.type": kind})
    span.set_status(Status(StatusCode.ERROR, kind))


def _attributes(values: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in values.items() if v is not None}


def carrier() -> dict[str, str] | None:
    """The current span's context as a W3C carrier (for a run's ``trace_context``
    or a routed message); ``None`` when tracing is off or no span is current."""
    if not enabled():
        return None
    out: dict[str, str] = {}
    propagate.inject(out)
    for key in DROPPED_CARRIER_KEYS:
        out.pop(key, None)
    return out or None


def annotate(span: Any, **values: Any) -> None:
    """Set ``weft.<key with dots>`` attributes (``workflow_id`` → ``weft.workflow.id``)."""
    if span is None:
        return
    for key, value in values.items():
        if value is not None:
            span.set_attribute("weft." + key.replace("_", "."), value)


@contextlib.contextmanager
def start_span(name: str, *, source: str, workflow_id: str | None = None) -> Iterator[Any]:
    """``weft.start <name>``, current while the run is written; yields the span
    (``None`` when tracing is off). Inside it, ``carrier()`` is the run's
    ``trace_context``."""
    if not enabled():
        yield None
        return
    span = _get_tracer().start_span(
        f"weft.start {name}",
        kind=SpanKind.PRODUCER,
        attributes=_attributes(
            {
                "weft.workflow.name": name,
                "weft.workflow.id": workflow_id,
                "weft.start.source": source,
            }
        ),
    )
    with trace.use_span(span, end_on_exit=True, record_exception=False):
        try:
            yield span
        except BaseException as exc:
            _fail(span, exc)
            raise


@contextlib.contextmanager
def turn_span(
    *, name: str, workflow_id: str, run_id: str, carrier: Any, engine_id: str, epoch: int
) -> Iterator[Any]:
    """``weft.turn <name>`` under the run's stored context, current for the
    whole turn; yields the span (``None`` when tracing is off)."""
    if not enabled():
        yield None
        return
    span = _get_tracer().start_span(
        f"weft.turn {name}",
        context=_parent(carrier),
        kind=SpanKind.CONSUMER,
        attributes={
            "weft.workflow.name": name,
            "weft.workflow.id": workflow_id,
            "weft.run.id": run_id,
            "weft.engine.id": engine_id,
            "weft.claim.epoch": epoch,
        },
    )
    with trace.use_span(span, end_on_exit=True, record_exception=False):
        try:
            yield span
        except BaseException as exc:
            span.set_attribute("weft.turn.outcome", "raised")
            _fail(span, exc)
            raise


def attempt_span(
    *,
    activity: str,
    position: int,
    attempt: int,
    workflow_name: str,
    workflow_id: str,
    run_id: str,
    engine_id: str,
    epoch: int,
    celery_queue: str | None = None,
) -> Any:
    """A started (not current) ``weft.activity <activity>`` under the current
    span (the turn's); ``None`` when tracing is off. Make it current around
    the submission (``current``) so the body runs under it; end it with
    ``end_attempt``."""
    if not enabled():
        return None
    return _get_tracer().start_span(
        f"weft.activity {activity}",
        attributes=_attributes(
            {
                "weft.activity.name": activity,
                "weft.position": position,
                "weft.attempt": attempt,
                "weft.workflow.name": workflow_name,
                "weft.workflow.id": workflow_id,
                "weft.run.id": run_id,
                "weft.engine.id": engine_id,
                "weft.claim.epoch": epoch,
                "weft.activity.celery_queue": celery_queue,
            }
        ),
    )


def current(span: Any) -> contextlib.AbstractContextManager[Any]:
    """``span`` as the current span (a context copied inside sees it); a no-op for ``None``."""
    if span is None:
        return contextlib.nullcontext()
    return trace.use_span(span, end_on_exit=False, record_exception=False)


def end_attempt(
    span: Any,
    *,
    ok: bool,
    error: BaseException | None = None,
    timed_out: bool = False,
) -> None:
    """End an attempt's span with its outcome (``completed``, ``failed``,
    ``timed_out``, ``abandoned``); ERROR for the failed and timed-out ones."""
    if span is None:
        return
    if ok:
        outcome = "completed"
    elif timed_out:
        outcome = "timed_out"
    elif type(error).__name__ == "AttemptAbandoned":
        outcome = "abandoned"
    else:
        outcome = "failed"
    span.set_attribute("weft.activity.outcome", outcome)
    if outcome in ("failed", "timed_out"):  # abandoned: nobody wants its result, no error
        _fail(span, error if error is not None else RuntimeError())
    span.end()


def end_with_future(span: Any, future: concurrent.futures.Future[Any]) -> None:
    """End ``span`` when the attempt's future resolves (an ``ActivityOutcome``)."""
    if span is None:
        return

    def done(resolved: concurrent.futures.Future[Any]) -> None:
        exc = resolved.exception()
        if exc is not None:
            end_attempt(span, ok=False, error=exc)
            return
        outcome = resolved.result()
        end_attempt(
            span,
            ok=bool(outcome.ok),
            error=outcome.error,
            timed_out=bool(outcome.timed_out),
        )

    future.add_done_callback(done)


@contextlib.contextmanager
def routed_span(
    *,
    activity: str,
    carrier: Any,
    position: int,
    attempt: int,
    workflow_id: str,
    run_id: str,
    epoch: int,
    worker: str,
) -> Iterator[Any]:
    """``weft.routed_activity <activity>`` (CONSUMER) on the Celery worker that
    runs a routed attempt, under the owner's attempt span (the message's carrier)."""
    if not enabled():
        yield None
        return
    span = _get_tracer().start_span(
        f"weft.routed_activity {activity}",
        context=_parent(carrier),
        kind=SpanKind.CONSUMER,
        attributes=_attributes(
            {
                "weft.activity.name": activity,
                "weft.position": position,
                "weft.attempt": attempt,
                "weft.workflow.id": workflow_id,
                "weft.run.id": run_id,
                "weft.claim.epoch": epoch,
                "weft.worker": worker or None,
            }
        ),
    )
    with trace.use_span(span, end_on_exit=True, record_exception=False):
        try:
            yield span
        except BaseException as exc:
            _fail(span, exc)
            raise


def run_ended(
    run: Any, status: str, *, engine_id: str, epoch: int, error_type: str | None = None
) -> None:
    """Emit ``weft.run <name>``: from the run's ``created_at`` to now, under the
    run's stored context, with its end status (ERROR when ``failed``, the
    error's type only)."""
    if not enabled():
        return
    created = getattr(run, "created_at", None)
    start_ns = int(created.timestamp() * 1_000_000_000) if created is not None else None
    span = _get_tracer().start_span(
        f"weft.run {run.name}",
        context=_parent(run.trace_context),
        start_time=start_ns,
        attributes={
            "weft.workflow.name": run.name,
            "weft.workflow.id": run.workflow_id,
            "weft.run.id": str(run.pk),
            "weft.run.status": status,
            "weft.engine.id": engine_id,
            "weft.claim.epoch": epoch,
        },
    )
    if status == "failed":
        kind = error_type or "failed"
        span.add_event("exception", {"exception.type": kind})
        span.set_status(Status(StatusCode.ERROR, kind))
    span.end()


__all__ = [
    "AVAILABLE",
    "TRACER_NAME",
    "annotate",
    "attempt_span",
    "carrier",
    "current",
    "enabled",
    "end_attempt",
    "end_with_future",
    "routed_span",
    "run_ended",
    "start_span",
    "turn_span",
]
