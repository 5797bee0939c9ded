"""Harness of the process tests: real ``manage.py weft_worker`` children.

SPEC §8: each worker runs in its own process group (``start_new_session``)
on the *test* database (``child_env()``), with the short claim timings of
``WEFT_TEST_TIMINGS=1`` (TTL 3 s, renew 1 s); tests kill every group in a
``finally`` before the database is flushed. On PostgreSQL each child's
connections carry its engine id as ``application_name``, so a test can see
them in ``pg_stat_activity``.

Every wait is a poll of the database bounded by a timeout that is hang
protection only; nothing here measures or asserts a duration. Safety is
read from durable records (``ClaimEvent``, ``JournalEntry``, ``SideEffect``).
"""

from __future__ import annotations

import os
import re
from collections import Counter, defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any
from urllib.parse import quote

from project.demo.models import SideEffect
from tests.support import ChildGroup, child_env, python, wait_for
from weft_django.kernel.clock import wall_ms as wall_ms  # the suite's wall clock
from weft_django.models import ClaimEvent, EngineRecord, JournalEntry
from weft_django.ownership import WORKFLOW_CLAIM_TAKEOVER_GRACE_MULTIPLIER

HANG_TIMEOUT_S = 20.0  # hang protection only, never a performance assertion
# WEFT_TEST_TIMINGS=1 in the children (project/settings.py): TTL 3 s, renew 1 s.
CHILD_RENEW_INTERVAL_MS = 1_000
CHILD_TTL_MS = 3_000
GRACE_MS = WORKFLOW_CLAIM_TAKEOVER_GRACE_MULTIPLIER * CHILD_RENEW_INTERVAL_MS
GRANTING_KINDS = ("acquire", "takeover")


class Worker(ChildGroup):
    """One ``manage.py weft_worker`` child; stdout and stderr go to a log file.

    ``imports``: workflow modules outside installed apps to load first (the
    child is then ``python -m tests.procs.worker``, which imports them and runs
    the same command).
    """

    reap_timeout_s = HANG_TIMEOUT_S

    def __init__(
        self,
        engine_id: str,
        logs: Path,
        *extra: str,
        env: dict[str, str] | None = None,
        imports: tuple[str, ...] = (),
    ) -> None:
        self.engine_id = engine_id
        environment = child_env(WEFT_TEST_TIMINGS="1", **(env or {}))
        url = environment["DATABASE_URL"]
        if url.startswith("postgres") and "?" not in url:
            environment["DATABASE_URL"] = f"{url}?application_name={quote(engine_id)}"
        program = ["-m", "tests.procs.worker", ",".join(imports)] if imports else ["manage.py"]
        super().__init__(
            [python(), *program, "weft_worker", "--engine-id", engine_id, *extra],
            logs / f"{engine_id}.log",
            environment,
        )

    def cpu_seconds(self) -> float | None:
        """CPU time (user + system) the worker used so far (Linux ``/proc``)."""
        return process_cpu_seconds(self.proc.pid)

    def wait_booted(self, timeout: float = HANG_TIMEOUT_S) -> EngineRecord:
        return wait_for(
            f"{self.engine_id} to boot",
            lambda: EngineRecord.objects.filter(pk=self.engine_id).first(),
            self,
            timeout=timeout,
        )

    def lines_about(self, workflow_id: str) -> list[str]:
        """Log lines that name ``workflow_id`` exactly (quoted or at a word end)."""
        pattern = re.compile(rf'(?:"{re.escape(workflow_id)}"|\b{re.escape(workflow_id)}$)')
        return [line for line in self.log().splitlines() if pattern.search(line)]


def process_cpu_seconds(pid: int) -> float | None:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def kill_all(workers: Iterable[Worker]) -> None:
    for worker in workers:
        worker.kill()


# -- durable records -------------------------------------------------------------------


def journal(run_id: str) -> list[JournalEntry]:
    return list(JournalEntry.objects.filter(run_id=run_id).order_by("position"))


def events_of(workflow_id: str) -> list[ClaimEvent]:
    return list(ClaimEvent.objects.filter(workflow_id=workflow_id).order_by("id"))


def events_by_workflow(workflow_ids: Iterable[str] | None = None) -> dict[str, list[ClaimEvent]]:
    rows = ClaimEvent.objects.order_by("id")
    if workflow_ids is not None:
        rows = rows.filter(workflow_id__in=list(workflow_ids))
    grouped: dict[str, list[ClaimEvent]] = defaultdict(list)
    for event in rows:
        grouped[event.workflow_id].append(event)
    return grouped


def journals_by_run(run_ids: Iterable[Any]) -> dict[str, list[JournalEntry]]:
    grouped: dict[str, list[JournalEntry]] = defaultdict(list)
    for entry in JournalEntry.objects.filter(run_id__in=list(run_ids)).order_by(
        "run_id", "position"
    ):
        grouped[str(entry.run_id)].append(entry)
    return grouped


def side_effect_counts(workflow_key: str, kind: str = "slow") -> Counter[str]:
    keys = SideEffect.objects.filter(kind=kind, key__startswith=f"{workflow_key}:")
    return Counter(keys.values_list("key", flat=True))


def assert_journal_fenced(entries: list[JournalEntry], events: list[ClaimEvent]) -> None:
    """Each entry was written under the epoch some event granted to its engine
    (an ``acquire`` or ``takeover`` at that epoch by that engine); epochs never
    decrease along the journal."""
    granting = [e for e in events if e.kind in GRANTING_KINDS]
    granted = {e.epoch: e.engine_id for e in granting}
    assert len(granted) == len(granting), [(e.kind, e.epoch, e.engine_id) for e in events]
    previous = 0
    for entry in entries:
        assert entry.epoch in granted, (entry.position, entry.epoch, granted)
        assert entry.engine_id == granted[entry.epoch], (entry.position, entry.engine_id, granted)
        assert entry.epoch >= previous, [(x.position, x.epoch) for x in entries]
        previous = entry.epoch


def superseded_at(events: list[ClaimEvent], epoch: int) -> int | None:
    """When ``epoch`` stopped being current: the first event at a newer epoch."""
    later = [e.at_ms for e in events if e.epoch > epoch]
    return min(later) if later else None


def assert_written_while_current(entries: list[JournalEntry], events: list[ClaimEvent]) -> None:
    """No entry is stamped later than the event that superseded its epoch.

    An engine committing at an epoch older than the stored one would write an
    entry whose ``at_ms`` (read just before its batch) is after the takeover or
    rotation that ended that epoch.
    """
    for entry in entries:
        ended = superseded_at(events, entry.epoch)
        assert ended is None or entry.at_ms <= ended, (
            entry.position,
            entry.engine_id,
            entry.epoch,
            entry.at_ms,
            ended,
        )


def assert_reruns_within(counts: Counter[str], takeovers: int, what: str) -> list[str]:
    """Every recorded step ran once, except the step in flight at each takeover
    (after a crash or a stall past expiry), which may have run twice: at most
    one such step per takeover. Returns the steps that ran twice."""
    twice = [k for k, n in counts.items() if n > 1]
    assert all(n <= 2 for n in counts.values()), (what, takeovers, counts)
    assert len(twice) <= takeovers, (what, takeovers, counts)
    return twice


def summary(values: list[int]) -> str:
    if not values:
        return "n/a"
    ordered = sorted(values)
    return (
        f"min {ordered[0]} / median {ordered[len(ordered) // 2]} / max {ordered[-1]} ms "
        f"(n={len(ordered)})"
    )
