"""``async def`` workflows on two ``weft_worker`` processes on PostgreSQL, one
SIGKILLed mid-run: every run ends as its generator twin does, and no activity
whose result was recorded ever runs again.

The scenarios (``tests/engines/async_twins.py``) cover activities (plain and
``async def``), sleep, signals (one rebuilt as a dataclass), ``wait_until``,
a nested ``ctx.all`` of a ``ctx.race`` and a ``ctx.map``, a child of each
kind, an update whose handler runs a command, a query, ``patched``, a saga, a
cancel whose cleanup awaits a command in ``finally``, and ``continue_as_new``.
Evidence is durable only: ``SideEffect`` rows written by each execution, the
journal, the runs. Every wait is a poll bounded by a hang timeout.
"""

from __future__ import annotations

import signal
from collections import Counter
from typing import Any

import pytest
from django.db import connection

from project.demo.models import SideEffect
from tests.engines.async_twins import IMPORTS, START
from tests.engines.harness import Worker, wait_for
from weft_django import client
from weft_django.models import JournalEntry, WorkflowClaim, WorkflowRun

pytestmark = [pytest.mark.processes, pytest.mark.django_db(transaction=True)]

RESULT_TIMEOUT_S = 60.0  # hang protection (a takeover waits out TTL + grace)


def _recorded_keys() -> Counter[str]:
    """Each activity result in any journal, by the key the activity returned."""
    keys: Counter[str] = Counter()
    for result in JournalEntry.objects.filter(kind="activity", error__isnull=True).values_list(
        "result", flat=True
    ):
        keys[result["key"] if isinstance(result, dict) else str(result)] += 1
    return keys


def _starts() -> Counter[str]:
    return Counter(SideEffect.objects.filter(kind=START).values_list("key", flat=True))


def _start_pairs() -> dict[str, list[Any]]:
    handles: dict[str, list[Any]] = {}
    for kind in ("a", "g"):
        prefix = "pa" if kind == "a" else "pg"
        main_input: Any = {"key": f"m1{kind}", "qty": 4}
        handles.setdefault("main", []).append(
            client.start(f"{prefix}-main", main_input, workflow_id=f"m1{kind}")
        )
        handles.setdefault("saga", []).append(
            client.start(f"{prefix}-saga", f"s1{kind}", workflow_id=f"s1{kind}")
        )
        handles.setdefault("cancel", []).append(
            client.start(f"{prefix}-cancel", f"c1{kind}", workflow_id=f"c1{kind}")
        )
        handles.setdefault("loop", []).append(
            client.start(f"{prefix}-loop", {"key": f"l1{kind}", "n": 2}, workflow_id=f"l1{kind}")
        )
    return handles


def test_async_runs_end_as_their_generator_twins_through_a_sigkill(tmp_path: Any) -> None:
    assert connection.vendor == "postgresql"
    workers = [Worker(f"twins-w{i}", tmp_path, imports=IMPORTS) for i in (1, 2)]
    try:
        for worker in workers:
            worker.wait_booted()
        handles = _start_pairs()
        for wid in ("m1a", "m1g"):  # buffered until the bodies wait for them
            client.signal(wid, "go", {"extra": 5})
            client.signal(wid, "bump", None)

        def doomed() -> str | None:
            """An engine that owns a run whose slow activity is in flight."""
            started = set(_starts())
            recorded = set(_recorded_keys())
            for wid, step in (("m1a", "slow"), ("m1g", "slow"), ("s1a", "s1"), ("s1g", "s1")):
                key = f"{wid}:{step}"
                if key in started and key not in recorded:
                    claim = WorkflowClaim.objects.filter(pk=wid).first()
                    if claim is not None and claim.engine_id:
                        return str(claim.engine_id)
            return None

        victim_id = wait_for("a slow activity in flight", doomed, *workers)
        victim = next(w for w in workers if w.engine_id == victim_id)
        recorded_before_kill = _recorded_keys()
        victim.kill()
        assert victim.proc.returncode == -signal.SIGKILL
        survivor = next(w for w in workers if w is not victim)

        # An update whose handler awaits a command, and a query, on each main run.
        for wid in ("m1a", "m1g"):
            assert client.update(wid, "add", "pear", timeout=RESULT_TIMEOUT_S) == 1
            assert client.query(wid, "state")["added"] == ["pear"]
        for handle in handles["cancel"]:
            wait_for(
                f"{handle.workflow_id} waiting",
                lambda h=handle: f"{h.workflow_id}:before" in _recorded_keys() or None,
                survivor,
            )
            client.cancel(handle.workflow_id, "stop", grace=60)

        results: dict[str, list[Any]] = {}
        for scenario, pair in handles.items():
            for handle in pair:
                if scenario == "cancel":
                    wait_for(
                        f"{handle.workflow_id} cancelled",
                        lambda h=handle: h.status() == "cancelled" or None,
                        survivor,
                        timeout=RESULT_TIMEOUT_S,
                    )
                    results.setdefault(scenario, []).append(handle.status())
                else:
                    results.setdefault(scenario, []).append(handle.result(timeout=RESULT_TIMEOUT_S))

        def twin(value: Any) -> Any:  # each run's keys carry its kind: compare without it
            text = repr(value)
            for wid in ("m1", "s1", "c1", "l1"):
                text = text.replace(f"{wid}a", wid).replace(f"{wid}g", wid)
            return text

        for scenario, (from_async, from_generator) in results.items():
            assert twin(from_async) == twin(from_generator), scenario
        main = results["main"][0]
        assert main["total"] == 40 and main["go"] == 5 and main["children"] == [21, 31]
        assert main["path"] == "new" and main["added"] == ["pear"]
        assert [o["status"] for o in results["saga"][0]] == ["ok"]
        assert results["loop"] == [0, 0]
        assert WorkflowRun.objects.filter(name__in=("pa-loop", "pg-loop")).count() == 6

        # No recorded activity ran twice: a key ran again only when its first
        # execution died with the engine before its result was recorded, and
        # every key is recorded exactly once.
        starts, recorded = _starts(), _recorded_keys()
        assert set(recorded) <= set(starts)
        assert all(count == 1 for count in recorded.values()), recorded
        again = {key for key, count in starts.items() if count > 1}
        assert not again & set(recorded_before_kill), again
        assert all(starts[key] == 1 for key in recorded_before_kill)
        cleanups = {key: starts[key] for key in ("c1a:cleanup", "c1g:cleanup")}
        assert cleanups == {"c1a:cleanup": 1, "c1g:cleanup": 1}
        print(f"\n[twins] victim {victim_id}; ran again after the kill: {sorted(again)}")
    finally:
        for worker in workers:
            worker.kill()
