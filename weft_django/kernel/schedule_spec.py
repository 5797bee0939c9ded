"""What a schedule is, validated, and when it ticks.

A schedule is declared three ways (``client.create_schedule``, ``WEFT["SCHEDULES"]``, the
API) and its ticks are computed in three places (the driver workflow,
``describe_schedule``, ``backfill_schedule``); all of them use this parser and this tick
function, so a value the client refuses is refused by the settings check with the same
message, and the tick the driver fires is the tick ``describe_schedule`` announced.

The invariant protected: **a tick is a nominal instant (integer ms) that
depends only on the spec** -- never on when an engine happened to look --
so the run's idempotency key (``tick_key``) and workflow id
(``tick_workflow_id``) derived from it are the same on every engine, and a
tick can start at most one run.

Cron expressions are parsed by ``cronsim`` (the parser of healthchecks.io:
small, maintained, no dependencies, and its daylight-saving behaviour is
documented and is Debian cron's: a time inside the skipped hour fires once
at the end of the gap, a time inside the repeated hour fires once, on its
first occurrence; expressions that fire every hour or more often fire in
both copies of the repeated hour, as cron does). ``every`` ticks are
aligned on ``start_at`` (or the Unix epoch), so ``every=1 s`` ticks on whole
seconds on every engine.

Imports nothing of weft_django above the kernel (conf validates
``WEFT["SCHEDULES"]`` through it).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Final, Literal, get_args
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from weft_django.kernel.durations import to_ms
from weft_django.kernel.ids import WORKFLOW_ID_HELP, is_workflow_id

Overlap = Literal["skip", "buffer_one", "allow", "cancel_previous"]
OVERLAP_POLICIES: Final[tuple[Overlap, ...]] = get_args(Overlap)

TickOutcome = Literal["fired", "skipped", "buffered", "missed", "triggered", "backfilled", "failed"]
"""The closed label set of ``weft_schedule_ticks_total{outcome}``:
``fired`` a tick started its run; ``skipped`` the overlap policy dropped it
(``skip``, or ``buffer_one`` with the buffer full); ``buffered`` it waits for
the previous run (``buffer_one``; it counts ``fired`` again when it starts);
``missed`` it was older than ``catchup_window`` when an engine looked;
``triggered`` / ``backfilled`` runs started by ``trigger_schedule`` /
``backfill_schedule``; ``failed`` the run could not be started (its workflow
is not registered on the engine)."""
TICK_OUTCOMES: Final[tuple[TickOutcome, ...]] = get_args(TickOutcome)

SCHEDULE_ID_MAX: Final = 160
"""A schedule id is a workflow id of at most 160 characters, so that the
driver's id (``weft.schedule:<id>``) and each tick's run id
(``<id>@<UTC instant>``) are valid workflow ids too."""

SPEC_FIELDS: Final = (
    "workflow",
    "input",
    "cron",
    "every",
    "timezone",
    "overlap",
    "catchup_window",
    "jitter",
    "start_at",
    "end_at",
    "paused",
)
DEFAULT_CATCHUP_WINDOW: Final = timedelta(minutes=10)
MAX_MISSED_COUNTED: Final = 100_000
"""Cron ticks counted one by one when an outage skipped them (beyond: the count stops)."""


@dataclass(frozen=True)
class ScheduleSpec:
    """A validated schedule: what to start and when (times in integer ms)."""

    schedule_id: str
    workflow: str
    input: Any = None
    cron: str | None = None
    every_ms: int | None = None
    timezone: str = "UTC"
    overlap: Overlap = "skip"
    catchup_window_ms: int = 600_000
    jitter_ms: int | None = None
    start_at_ms: int | None = None
    end_at_ms: int | None = None
    paused: bool = False

    def fields(self) -> dict[str, Any]:
        """The spec as the model's column values (``Schedule`` row)."""
        return {
            "workflow": self.workflow,
            "input": self.input,
            "cron": self.cron,
            "every_ms": self.every_ms,
            "timezone": self.timezone,
            "overlap": self.overlap,
            "catchup_window_ms": self.catchup_window_ms,
            "jitter_ms": self.jitter_ms,
            "start_at_ms": self.start_at_ms,
            "end_at_ms": self.end_at_ms,
            "paused": self.paused,
        }


def validate_schedule_id(value: object) -> str:
    """``value`` if it is a valid schedule id, else ``ValueError`` naming it."""
    if not is_workflow_id(value) or len(str(value)) > SCHEDULE_ID_MAX:
        raise ValueError(
            f"schedule id {value!r} must be a workflow id ({WORKFLOW_ID_HELP}) "
            f"of at most {SCHEDULE_ID_MAX} characters"
        )
    assert isinstance(value, str)
    return value


def _instant_ms(value: object, what: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        if value.tzinfo is None:
            raise ValueError(f"schedule {what} must be an aware datetime, got {value!r}")
        return int(value.timestamp() * 1000)
    if isinstance(value, int) and not isinstance(value, bool):
        return value  # already ms (a stored row)
    raise ValueError(f"schedule {what} must be an aware datetime, got {value!r}")


#: The longest schedule duration (``every``, ``catchup_window``, ``jitter``): 100 years.
MAX_DURATION_MS = 100 * 365 * 24 * 3600 * 1000


def _duration_ms(value: object, what: str, *, allow_zero: bool) -> int:
    try:
        ms = to_ms(value, what)  # type: ignore[arg-type]
    except (TypeError, ValueError) as exc:
        raise ValueError(f"schedule {what} must be a duration, got {value!r} ({exc})") from None
    if ms < 0 or (ms == 0 and not allow_zero):
        raise ValueError(f"schedule {what} must be a positive duration, got {value!r}")
    if ms > MAX_DURATION_MS:  # added to instants the store keeps below 2**53 ms
        raise ValueError(f"schedule {what} must be at most 100 years, got {value!r:.100}")
    return ms


def check_cron(expression: object) -> str:
    """``expression`` if it is a valid 5-field cron expression, else ``ValueError``."""
    from cronsim import CronSim, CronSimError

    if not isinstance(expression, str) or len(expression.split()) != 5:
        raise ValueError(f"cron {expression!r} must be a 5-field cron expression")
    try:
        CronSim(expression, datetime(2000, 1, 1, tzinfo=UTC))
    except CronSimError as exc:
        raise ValueError(f"cron {expression!r} is not a valid cron expression ({exc})") from None
    return expression


def check_timezone(name: object) -> str:
    if not isinstance(name, str) or not name:
        raise ValueError(f"timezone {name!r} must be an IANA time zone name")
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"timezone {name!r} is not a known IANA time zone") from None
    return name


def build_spec(schedule_id: object, fields: Mapping[str, Any]) -> ScheduleSpec:
    """Validate ``fields`` (``SPEC_FIELDS``); ``ValueError`` naming the bad value.

    ``every``, ``catchup_window`` and ``jitter`` are durations (``timedelta``
    or seconds); ``start_at``/``end_at`` aware datetimes. The workflow name is
    checked by the caller (the registry is not the kernel's).
    """
    sid = validate_schedule_id(schedule_id)
    unknown = sorted(set(fields) - set(SPEC_FIELDS))
    if unknown:
        raise ValueError(
            f"schedule {sid!r}: unknown field(s) {', '.join(map(repr, unknown))}; "
            f"known: {', '.join(SPEC_FIELDS)}"
        )
    workflow = fields.get("workflow")
    if not isinstance(workflow, str) or not workflow:
        raise ValueError(f"schedule {sid!r}: workflow must be a workflow name, got {workflow!r}")
    cron, every = fields.get("cron"), fields.get("every")
    if (cron is None) == (every is None):
        raise ValueError(
            f"schedule {sid!r}: give exactly one of cron or every (got cron={cron!r}, "
            f"every={every!r})"
        )
    every_ms = None if every is None else _duration_ms(every, "every", allow_zero=False)
    if cron is not None:
        check_cron(cron)
    overlap = fields.get("overlap", "skip")
    if overlap not in OVERLAP_POLICIES:
        raise ValueError(
            f"schedule {sid!r}: overlap {overlap!r} must be one of "
            + ", ".join(map(repr, OVERLAP_POLICIES))
        )
    window = fields.get("catchup_window", DEFAULT_CATCHUP_WINDOW)
    jitter = fields.get("jitter")
    paused = fields.get("paused", False)
    if not isinstance(paused, bool):
        raise ValueError(f"schedule {sid!r}: paused must be True or False, got {paused!r}")
    start_at_ms = _instant_ms(fields.get("start_at"), "start_at")
    end_at_ms = _instant_ms(fields.get("end_at"), "end_at")
    if start_at_ms is not None and end_at_ms is not None and end_at_ms <= start_at_ms:
        raise ValueError(f"schedule {sid!r}: end_at must be after start_at")
    return ScheduleSpec(
        schedule_id=sid,
        workflow=workflow,
        input=fields.get("input"),
        cron=cron,
        every_ms=every_ms,
        timezone=check_timezone(fields.get("timezone", "UTC")),
        overlap=overlap,
        catchup_window_ms=_duration_ms(window, "catchup_window", allow_zero=True),
        jitter_ms=None if jitter is None else _duration_ms(jitter, "jitter", allow_zero=True),
        start_at_ms=start_at_ms,
        end_at_ms=end_at_ms,
        paused=paused,
    )


def parse_declared(value: object) -> tuple[tuple[ScheduleSpec, ...], list[tuple[str, str]]]:
    """``WEFT["SCHEDULES"]`` -> its valid specs and ``(kind, message)`` problems.

    ``kind`` is ``"bad-schedules"`` (the setting or an entry has the wrong
    shape, or an id is invalid) or ``"bad-schedule-spec"`` (a value of an
    entry: cron, timezone, durations, overlap ...); ``conf`` maps them to
    ``weft.E027`` / ``weft.E028``. Every message names the entry and value.
    """
    if not isinstance(value, Mapping):
        return (), [
            (
                "bad-schedules",
                f"WEFT['SCHEDULES'] must be a dict of schedule id -> entry, got {value!r}",
            )
        ]
    specs: list[ScheduleSpec] = []
    problems: list[tuple[str, str]] = []
    for sid, entry in value.items():
        try:
            validate_schedule_id(sid)
        except ValueError as exc:
            problems.append(("bad-schedules", f"WEFT['SCHEDULES']: {exc}"))
            continue
        if not isinstance(entry, Mapping):
            problems.append(
                (
                    "bad-schedules",
                    f"WEFT['SCHEDULES'][{sid!r}] must be a dict (workflow, cron or every, ...), "
                    f"got {entry!r}",
                )
            )
            continue
        try:
            specs.append(build_spec(sid, entry))
        except ValueError as exc:
            problems.append(("bad-schedule-spec", f"WEFT['SCHEDULES'][{sid!r}]: {exc}"))
    return tuple(specs), problems


# -- ticks ---------------------------------------------------------------------------
def ticks_after(spec: ScheduleSpec, after_ms: int) -> Iterator[int]:
    """Nominal tick instants strictly after ``after_ms``, in order, within
    ``start_at``/``end_at`` (the iterator ends at ``end_at``)."""
    low = after_ms
    if spec.start_at_ms is not None and low < spec.start_at_ms:
        low = spec.start_at_ms - 1  # start_at itself may be a tick
    if spec.every_ms is not None:
        anchor = spec.start_at_ms if spec.start_at_ms is not None else 0
        step = spec.every_ms
        tick = anchor + ((low - anchor) // step + 1) * step
        while spec.end_at_ms is None or tick <= spec.end_at_ms:
            yield tick
            tick += step
        return
    from cronsim import CronSim

    assert spec.cron is not None
    zone = ZoneInfo(spec.timezone)
    # cronsim yields instants strictly after its start, to the second.
    start = datetime.fromtimestamp((low // 1000), tz=UTC).astimezone(zone)
    for when in CronSim(spec.cron, start):
        tick = int(when.timestamp()) * 1000
        if tick <= low:
            continue
        if spec.end_at_ms is not None and tick > spec.end_at_ms:
            return
        yield tick


def next_ticks(spec: ScheduleSpec, after_ms: int, count: int) -> list[int]:
    out: list[int] = []
    for tick in ticks_after(spec, after_ms):
        out.append(tick)
        if len(out) >= count:
            break
    return out


def count_ticks(spec: ScheduleSpec, after_ms: int, until_ms: int) -> int:
    """Ticks in ``(after_ms, until_ms]`` (cron: at most ``MAX_MISSED_COUNTED``)."""
    if until_ms <= after_ms:
        return 0
    if spec.every_ms is not None:
        last = until_ms if spec.end_at_ms is None else min(until_ms, spec.end_at_ms)
        first = next_ticks(spec, after_ms, 1)
        if not first or first[0] > last:
            return 0
        return (last - first[0]) // spec.every_ms + 1
    n = 0
    for tick in ticks_after(spec, after_ms):
        if tick > until_ms or n >= MAX_MISSED_COUNTED:
            break
        n += 1
    return n


def jitter_offset_ms(spec: ScheduleSpec, tick_ms: int) -> int:
    """A delay in ``[0, jitter)`` that is the same on every engine for this tick."""
    if not spec.jitter_ms:
        return 0
    digest = hashlib.sha256(f"{spec.schedule_id}:{tick_ms}".encode()).digest()
    return int.from_bytes(digest[:8], "big") % spec.jitter_ms


def tick_key(schedule_id: str, tick_ms: int) -> str:
    """The idempotency key of a tick's run: one run per (schedule, nominal time)."""
    return f"weft.schedule:{schedule_id}:{tick_ms}"


def tick_workflow_id(schedule_id: str, tick_ms: int) -> str:
    """The workflow id of a tick's run, ``<schedule id>@<UTC instant>``."""
    when = datetime.fromtimestamp(tick_ms / 1000, tz=UTC)
    return f"{schedule_id}@{when.strftime('%Y-%m-%dT%H:%M:%S')}.{tick_ms % 1000:03d}Z"


def run_id_prefix(schedule_id: str) -> str:
    """Every run a schedule started has a workflow id starting with this."""
    return f"{schedule_id}@"


def driver_workflow_id(schedule_id: str) -> str:
    """The id of the system workflow that owns and fires the schedule."""
    return f"weft.schedule:{schedule_id}"


DRIVER_WORKFLOW: Final = "weft.schedule"
CHANGED_SIGNAL: Final = "weft.schedule.changed"


__all__ = [
    "CHANGED_SIGNAL",
    "DRIVER_WORKFLOW",
    "OVERLAP_POLICIES",
    "SCHEDULE_ID_MAX",
    "SPEC_FIELDS",
    "TICK_OUTCOMES",
    "Overlap",
    "ScheduleSpec",
    "TickOutcome",
    "build_spec",
    "check_cron",
    "check_timezone",
    "count_ticks",
    "driver_workflow_id",
    "jitter_offset_ms",
    "next_ticks",
    "parse_declared",
    "run_id_prefix",
    "tick_key",
    "tick_workflow_id",
    "ticks_after",
    "validate_schedule_id",
]
