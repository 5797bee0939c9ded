"""``manage.py weft_replay_check``: replay live runs against the code about to be deployed.

Run it from the new release (its code, the production database) before the
engines switch over: every live run (pending, running, parked, suspended) is
replayed read-only against its journal, and each run the new code would
break is reported with its run id, workflow, journal position, the recorded
command and the one the code now yields. A live run of a workflow name no
`@workflow` registers any more is reported once per name. Exit status 1 on
any finding, 0 when clean, so a deploy pipeline can gate on it. Nothing is
written; runs are read in chunks, so memory does not grow with the store.
`--json` prints one object: `{"checked": N, "skipped": M, "failures": [...]}`
(`skipped`: live runs a `--limit` left out; each failure has a `kind` —
`non-determinism`, `unknown-workflow` or `replay-error` — and its `message`).

`--history run.json [run2.json ...]` checks exported histories
(`manage.py weft history export`) instead of the database: the same replay,
the same findings and exit status, no database read. A file of another
format version, truncated or edited (its checksum) is refused with exit 2
before any replay.
"""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from weft_django.engine.replay.check import (
    Finding,
    ReplayReport,
    check_histories,
    check_live_runs,
    live_runs,
)
from weft_django.engine.replay.history import HistoryFormatError
from weft_django.engine.workflow.definitions import has_workflow
from weft_django.management import checked_args as checked


def _limit(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        number = -1
    if number < 1:
        raise CommandError(f"--limit must be a positive integer, got {value!r}")
    return number


class Command(BaseCommand):
    help = (
        "Replay live runs read-only against this code; report each non-determinism (exit 1 on any)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--workflow", help="check only the live runs of this workflow name")
        parser.add_argument(
            "--limit", help="check at most this many runs (a uniform sample; default: all)"
        )
        parser.add_argument("--json", action="store_true", help="print one JSON object")
        parser.add_argument(
            "--history",
            nargs="+",
            metavar="FILE",
            help="check these exported histories instead of the database's live runs",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["history"]:
            if options["workflow"] is not None or options["limit"] is not None:
                raise CommandError(
                    "--history checks whole files: --workflow and --limit do not apply"
                )
            try:
                report = check_histories(options["history"])
            except HistoryFormatError as exc:
                raise CommandError(str(exc), returncode=2) from exc
            self._report(report, options, what="history(ies)")
            return
        workflow: str | None = options["workflow"]
        if workflow is not None:
            checked.text("--workflow", workflow)
        limit = _limit(options["limit"]) if options["limit"] is not None else None
        if workflow is not None and not has_workflow(workflow) and not live_runs(workflow).exists():
            raise CommandError(
                f"unknown workflow {workflow!r}: no @workflow registers it and no live run has it"
            )
        report = check_live_runs(workflow=workflow, limit=limit)
        self._report(report, options, what="live run(s)")

    def _report(self, report: ReplayReport, options: dict[str, Any], *, what: str) -> None:
        if options["json"]:
            self.stdout.write(json.dumps(report.as_dict(), sort_keys=True))
        else:
            for finding in report.failures:
                self.stdout.write(_line(finding))
        summary = _summary(report, what)
        if not report.ok:
            # Exit status 1 (Django prints the message on stderr): the deploy gate.
            raise CommandError(summary, returncode=1)
        if not options["json"]:
            self.stdout.write(self.style.SUCCESS(summary))


def _summary(report: ReplayReport, what: str) -> str:
    summary = f"{report.checked} {what} replayed, {len(report.failures)} finding(s)"
    if report.skipped:
        summary += f", {report.skipped} not checked (--limit)"
    return summary


def _line(finding: Finding) -> str:
    if finding.kind == "unknown-workflow":
        return f"UNKNOWN WORKFLOW {finding.workflow}: {finding.message}"
    head = f"{finding.kind.upper()} {finding.workflow} {finding.workflow_id} run {finding.run_id}"
    if finding.kind == "non-determinism":
        return (
            f"{head} at position {finding.position}: recorded {finding.recorded!r}, "
            f"now {finding.new!r}"
        )
    return f"{head}: {finding.message}"
