"""The run page's picture: a server-rendered SVG timeline of the run's steps.

One row per activity attempt (``models.ActivityAttempt``: from its start to
its end, a failed one red and an interrupted one orange, its error's
headline in its tooltip) and one per other journal step -- sleeps, signals,
waits, children -- as a bar on one time axis from the run's creation to its
end (or now); the attempts of a command not settled yet (a retry pending)
after them, the run's open waits (timers) as bars ending at their due time,
and a child's row linking to the child run. A step recorded before attempts
were (or a fork's copied step) has no attempt row: it is drawn as a step.

The invariants it protects:

* **Bounded**: at most ``CHART_ROWS`` bars are drawn (the first ones; the
  journal below pages through the rest), so the page's size does not grow
  with the run's history.
* **Nothing from elsewhere**: plain SVG in the page (no script, no CDN);
  every text is escaped.
* **No invented durations**: an attempt's bar runs from its recorded start
  to its recorded end; another step's from the previous step's end (when the
  body could issue it) to its own record, which is what the journal knows;
  the legend says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.urls import reverse
from django.utils import timezone
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from weft_django.admin.base import db
from weft_django.inspection import format_age, format_instant
from weft_django.inspection.attempts import error_text
from weft_django.kernel.clock import wall_ms
from weft_django.models import ActivityAttempt, AttemptOutcome, JournalEntry, Timer, WorkflowRun

#: The most journal steps drawn.
CHART_ROWS = 60

WIDTH, LABEL, ROW, TOP = 1000, 270, 20, 24
_COLOURS = {
    "activity": "#1565c0",
    "async-activity": "#00838f",
    "sleep": "#9e9e9e",
    "signal": "#ef8f00",
    "wait-condition": "#ef8f00",
    "child": "#6a1b9a",
    "signal-workflow": "#8d6e63",
    "timer": "#bdbdbd",
}
_FAILED = "#c62828"
_INTERRUPTED = "#ef6c00"
#: The journal kinds whose command's attempts are drawn in their place.
_ATTEMPTED = ("activity", "async-handout")


@dataclass(frozen=True)
class Bar:
    """One row: a label, a span in engine-clock ms, a colour, a tooltip, a link."""

    label: str
    start: int
    end: int
    colour: str
    title: str
    href: str | None = None
    dashed: bool = False


def _ms(moment: Any) -> int:
    return int(moment.timestamp() * 1000)


def _attempts(entry: JournalEntry) -> int | None:
    fields = entry.error.get("fields") if isinstance(entry.error, dict) else None
    attempts = fields.get("attempts") if isinstance(fields, dict) else None
    return attempts if isinstance(attempts, int) else None


def _child_links(run: WorkflowRun, entries: list[JournalEntry]) -> dict[int, str]:
    """Journal position of each child step -> the admin URL of its child run
    (children matched by name, in the order they were started)."""
    children = WorkflowRun.objects.using(db()).filter(parent_id=run.pk).order_by("created_at")
    by_name: dict[str, list[WorkflowRun]] = {}
    for child in children.only("pk", "name", "workflow_id")[: CHART_ROWS * 2]:
        by_name.setdefault(child.name, []).append(child)
    links: dict[int, str] = {}
    for entry in entries:
        if entry.kind == "child" and by_name.get(entry.target):
            child = by_name[entry.target].pop(0)
            links[entry.position] = reverse("admin:weft_workflowrun_change", args=[child.pk])
    return links


def _attempts_by_command(run: WorkflowRun) -> dict[int, list[ActivityAttempt]]:
    """The run's first ``CHART_ROWS`` attempts (bounded), by command position."""
    found: dict[int, list[ActivityAttempt]] = {}
    rows = ActivityAttempt.objects.using(db()).filter(run_id=run.pk).order_by("started_at", "id")
    for attempt in rows[:CHART_ROWS]:
        found.setdefault(attempt.position, []).append(attempt)
    return found


def _attempt_bar(attempt: ActivityAttempt, what: str, alone: bool = False) -> Bar:
    """One attempt's bar: ``what`` names its step (``alone``: its step's only
    attempt, and the first: the label need not number it)."""
    label = what if alone and attempt.attempt == 1 else f"{what} · attempt {attempt.attempt}"
    took = format_age((attempt.ended_at - attempt.started_at) / 1000)
    if attempt.outcome == AttemptOutcome.OK:
        return Bar(
            label,
            attempt.started_at,
            attempt.ended_at,
            _COLOURS["activity"],
            f"{label}: done after {took} ({attempt.engine_id})",
        )
    interrupted = attempt.outcome == AttemptOutcome.INTERRUPTED
    how = "interrupted (its engine stopped)" if interrupted else "failed"
    title = f"{label}: {how} after {took} ({attempt.engine_id}): {error_text(attempt)}"
    colour = _INTERRUPTED if interrupted else _FAILED
    return Bar(label, attempt.started_at, attempt.ended_at, colour, title)


def bars(run: WorkflowRun, now_ms: int | None = None) -> tuple[list[Bar], int, int, int]:
    """The chart's rows, its time span (start, end) and how many rows were left out."""
    start = _ms(run.created_at)
    journal = JournalEntry.objects.using(db()).filter(run_id=run.pk).order_by("position")
    total = journal.count()
    entries = list(journal[:CHART_ROWS])
    links = _child_links(run, entries)
    by_command = _attempts_by_command(run)
    rows: list[Bar] = []
    previous = _ms(run.started_at) if run.started_at else start
    for entry in entries:
        leaf = entry.command if entry.kind in _ATTEMPTED else None
        tried = by_command.pop(leaf, []) if leaf is not None else []
        if tried:
            what = f"#{entry.position} {entry.target}"
            rows.extend(_attempt_bar(a, what, alone=len(tried) == 1) for a in tried)
            previous = max(previous, entry.at_ms, *(a.ended_at for a in tried))
            continue
        began = min(previous, entry.at_ms)
        failed = entry.error is not None
        attempts = _attempts(entry)
        took = format_age((entry.at_ms - began) / 1000)
        what = f"{entry.kind} {entry.target}".strip()
        label = f"#{entry.position} {what}"
        if attempts and attempts > 1:
            label += f" ({attempts} attempts)"
        title = f"{label}: {'failed' if failed else 'done'} after {took}"
        colour = _FAILED if failed else _COLOURS.get(entry.kind, "#546e7a")
        rows.append(Bar(label, began, entry.at_ms, colour, title, href=links.get(entry.position)))
        previous = max(previous, entry.at_ms)
    for position, tried in sorted(by_command.items()):  # not settled yet (a retry pending)
        rows.extend(_attempt_bar(a, f"command {position} {a.activity}") for a in tried)
        previous = max(previous, *(a.ended_at for a in tried))
    left_out = max(0, total - len(entries)) + max(0, len(rows) - CHART_ROWS)
    rows = rows[:CHART_ROWS]
    now = wall_ms() if now_ms is None else now_ms
    end = _ms(run.finished_at) if run.finished_at else max(now, previous)
    if run.finished_at is None and not left_out:
        for timer in Timer.objects.using(db()).filter(run_id=run.pk).order_by("fire_at")[:10]:
            due = format_instant(timer.fire_at, with_relative=True, relative_to=now)
            rows.append(
                Bar(
                    f"waits: {timer.kind} timer",
                    previous,
                    timer.fire_at,
                    _COLOURS["timer"],
                    f"{timer.kind} timer due {due}",
                    dashed=True,
                )
            )
            end = max(end, timer.fire_at)
    return rows, start, max(end, start + 1), left_out


def run_chart(run: WorkflowRun, now_ms: int | None = None) -> SafeString:
    """The run's SVG timeline (a sentence when the run has no step yet)."""
    rows, start, end, left_out = bars(run, now_ms)
    if not rows:
        return mark_safe("<p>No step recorded yet.</p>")
    span = end - start
    scale = (WIDTH - LABEL - 70) / span
    height = TOP + ROW * len(rows) + 8
    parts = [
        f'<svg class="weft-run-chart" xmlns="http://www.w3.org/2000/svg" role="img" '
        f'viewBox="0 0 {WIDTH} {height}" width="{WIDTH}" height="{height}">',
        f"<title>{escape(run.workflow_id)}: {len(rows)} bars over {format_age(span / 1000)}"
        "</title>",
        f'<text x="{LABEL}" y="14" fill="#666">{escape(format_instant(start))}</text>',
        f'<text x="{WIDTH - 4}" y="14" fill="#666" text-anchor="end">'
        f"+{escape(format_age(span / 1000))}</text>",
    ]
    for i, bar in enumerate(rows):
        y = TOP + i * ROW
        x = LABEL + (bar.start - start) * scale
        w = max(2.0, (bar.end - bar.start) * scale)
        dash = ' stroke="#757575" stroke-dasharray="4 2" fill-opacity="0.4"' if bar.dashed else ""
        label = escape(bar.label if len(bar.label) <= 40 else bar.label[:39] + "…")
        text = f'<text x="4" y="{y + 13}" fill="#333">{label}</text>'
        if bar.href:
            text = f'<a href="{escape(bar.href)}">{text.replace("#333", "#1565c0")}</a>'
        parts += [
            f'<g class="weft-step"><title>{escape(bar.title)}</title>{text}',
            f'<rect x="{x:.1f}" y="{y + 3}" width="{w:.1f}" height="{ROW - 6}" rx="2" '
            f'fill="{bar.colour}"{dash}/>',
            f'<text x="{x + w + 4:.1f}" y="{y + 13}" fill="#666">'
            f"{escape(format_age((bar.end - bar.start) / 1000))}</text></g>",
        ]
    parts.append("</svg>")
    note = (
        f'<p class="help">The first {CHART_ROWS} bars; {left_out} more in the journal below.</p>'
        if left_out
        else ""
    )
    legend = (
        '<p class="help">One bar per activity attempt, from its start to its end (red: '
        "failed, orange: interrupted, its engine stopped; hover for the error); other steps "
        "run from the previous step's end to their record; dashed bars are open timers. "
        "Times in "
        f"{escape(timezone.get_current_timezone_name())}.</p>"
    )
    return mark_safe("".join(parts) + note + legend)


__all__ = ["CHART_ROWS", "Bar", "bars", "run_chart"]
