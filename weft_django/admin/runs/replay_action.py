"""The run changelist's "Replay against current code" action (the deploy gate).

Read-only, so it needs only the view permission: the selected runs (any
status; a terminal run's complete journal is the strictest replay) are
replayed in this web process through ``engine.replay_check`` -- nothing is
written, no owner is asked -- and the outcome is ONE summary message,
however many runs were selected. A selection of every page is bounded by
``REPLAY_ACTION_LIMIT`` runs, so a click cannot hold a request for minutes;
``manage.py weft_replay_check`` covers a whole store.
"""

from __future__ import annotations

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from weft_django.engine.replay.check import Finding, replay_runs
from weft_django.models import WorkflowRun

#: Runs one click replays at most (the rest of the selection is counted).
REPLAY_ACTION_LIMIT = 1000
#: Findings the summary names; the rest are counted.
NAMED_FINDINGS = 5


@admin.action(description="Replay against current code", permissions=["view"])
def replay_against_current_code(
    modeladmin: admin.ModelAdmin[WorkflowRun], request: HttpRequest, queryset: QuerySet[WorkflowRun]
) -> None:
    findings: list[Finding] = []
    checked = 0
    for finding in replay_runs(queryset, limit=REPLAY_ACTION_LIMIT):
        checked += 1
        if finding is not None:
            findings.append(finding)
    selected = queryset.count()
    text = f"Replayed {checked} run(s) against the current code"
    if selected > checked:
        text += f" (the first {checked} of {selected} selected)"
    if not findings:
        messages.success(request, f"{text}: every one replays.")
        return
    named = "; ".join(_describe(f) for f in findings[:NAMED_FINDINGS])
    more = len(findings) - NAMED_FINDINGS
    tail = f"; and {more} more" if more > 0 else ""
    messages.error(request, f"{text}: {len(findings)} would break: {named}{tail}.")


def _describe(finding: Finding) -> str:
    if finding.kind == "non-determinism":
        return (
            f"{finding.workflow_id} at position {finding.position} recorded "
            f"{finding.recorded}, now {finding.new}"
        )
    return f"{finding.workflow_id}: {finding.message}"
