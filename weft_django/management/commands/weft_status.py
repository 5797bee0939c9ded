"""``manage.py weft_status``: the cluster at a glance, and a liveness probe.

Shows engines (alive or not, heartbeat age, claims held), claims per engine,
expired claims, runs by status and how long the oldest due timer has been
waiting. ``--json`` prints the same as one JSON document (for scripts).
``--check`` turns it into a probe: exit status 1 when no engine is alive or
due timers lag more than ``--max-lag`` seconds (timers that stay due mean
nobody is driving the workflows that own them).

The numbers come from ``weft_django.inspection``, the same code the admin and
the Prometheus collector use, so a probe and a dashboard never disagree.
"""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from weft_django.conf import get_settings
from weft_django.inspection import ClusterStatus, cluster_status, format_age, format_ms
from weft_django.management import checked_args as checked
from weft_django.management.queue_status import print_queues
from weft_django.management.schedule_status import print_schedules


class Command(BaseCommand):
    help = (
        "Show engines, claims per engine, expired claims, runs by status and due-timer lag; "
        "--check exits 1 when no engine is alive or timers lag."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--json", action="store_true", help="print one JSON document")
        parser.add_argument(
            "--check",
            action="store_true",
            help="exit 1 when no engine is alive or due timers lag more than --max-lag",
        )
        parser.add_argument(
            "--max-lag",
            type=float,
            default=60.0,
            metavar="SECONDS",
            help="the due-timer lag --check tolerates (default 60)",
        )
        parser.add_argument(
            "--engines",
            type=int,
            default=20,
            metavar="N",
            help="also list the N most recent engines that are not alive (default 20)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        max_lag = float(options["max_lag"])
        if not max_lag >= 0:
            raise CommandError("--max-lag must be a non-negative number of seconds")
        engines = checked.count("--engines", int(options["engines"]), 0, 10_000)
        status = cluster_status(recent_engines=engines)
        if options["json"]:
            data = status.to_json(max_lag if options["check"] else None)
            self.stdout.write(json.dumps(data, indent=2, sort_keys=True))
        else:
            self._print(status)
        if options["check"]:
            problems = status.problems(max_lag)
            if problems:
                raise CommandError("weft check failed: " + "; ".join(problems), returncode=1)
            if not options["json"]:
                self.stdout.write(self.style.SUCCESS("weft check ok"))

    def _print(self, status: ClusterStatus) -> None:
        out = self.stdout.write
        marker = status.marker
        marker_text = (
            f"{marker['mode']} (since {format_ms(marker['established_at'])})" if marker else "none"
        )
        out(f"ownership: {status.ownership}; store marker: {marker_text}")
        alive = status.alive_engines
        for queue, waiting in sorted(status.unserved_queues.items()):
            out(f"queue {queue}: {waiting} waiting run(s), served by no live engine")
        print_queues(out, status)
        out(f"engines: {len(alive)} alive of {status.engines_total} recorded")
        if status.engines:
            rows = [("ENGINE", "NODE", "ALIVE", "HEARTBEAT AGE", "CLAIMS", "STOPPED")]
            rows += [
                (
                    e.engine_id,
                    e.node_name or "-",
                    "yes" if e.alive else "no",
                    format_age(e.heartbeat_age_s),
                    str(e.claims_held),
                    "yes" if e.stopped_at is not None else "no",
                )
                for e in status.engines
            ]
            widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
            for row in rows:
                cells = (cell.ljust(w) for cell, w in zip(row, widths, strict=True))
                out(("  " + "  ".join(cells)).rstrip())
        out("claims per engine:")
        if status.claims_per_engine:
            known = {e.engine_id: e.alive for e in status.engines}
            for engine_id, n in status.claims_per_engine.items():
                note = "" if known.get(engine_id) else " (engine not alive)"
                out(f"  {engine_id}: {n}{note}")
        else:
            out("  (none held)")
        out(f"expired claims: {status.expired_claims}")
        runs = ", ".join(f"{name} {n}" for name, n in status.runs_by_status.items())
        out(f"runs by status: {runs}")
        out(f"due timers: {status.due_timers}; oldest due for {format_age(status.due_timer_lag_s)}")
        totals = status.totals
        attempts = ", ".join(f"{o} {n}" for o, n in totals.attempts.items())
        out(
            f"claim attempts (all engines): {attempts}; renewal failures "
            f"{totals.renewal_failures}; claims active (live engines) {totals.active_claims}"
        )
        out(f"abandoned activity threads (all engines): {totals.abandoned_activity_threads}")
        rate = totals.workflow_cache_hit_rate
        out(
            f"workflow cache (all engines): hits {totals.workflow_cache_hits}, misses "
            f"{totals.workflow_cache_misses}, hit rate {'-' if rate is None else f'{rate:.1%}'}"
        )
        print_schedules(out, get_settings().database)
