"""The outside world's part in the flow-control and poison workloads
(``devtools.chaos.flows``), played by the harness's ``Driver``.

A seeded plan, spread over the start window like the ordinary starts:

- fair bursts: a busy fairness key's ``FAIR_BUSY`` runs, then ``FAIR_SMALL``
  small keys' one run each, started at once into the fair queue (FIFO would
  admit every busy run first; fairness admits each small key within the busy
  key's weight of admissions); the busy key's weight is 1 or 2 by turns;
- debounce bursts: ``DEBOUNCE_CALLS`` calls of ``client.debounce`` for one
  key, ``DEBOUNCE_SPACING_S`` apart, well inside the period: one run, with
  the last call's input; each call is recorded with the wall clock around it
  and the run it returned (``check_flow.DebounceCall``);
- ``client.trigger_schedule`` of the soak's schedule (its runs share the
  children's queue);
- the poison runs, one of each kind per ``ChaosConfig.poison``; the
  schedule is deleted only once they are contained and quiet (``settled``).

Everything it did is in the ``check.Actions`` the audit reads.
"""

from __future__ import annotations

import contextlib
import json
import random
from datetime import timedelta
from pathlib import Path
from typing import Any

from devtools.chaos import workflows as chaos
from devtools.chaos.check import Actions
from devtools.chaos.check_flow import DebounceCall, DebouncePlan
from devtools.chaos.flows import DEBOUNCED
from weft_django import client
from weft_django.errors import ScheduleNotFound
from weft_django.kernel.clock import wall_ms
from weft_django.models import WorkflowRun

FAIR_BUSY = 6
FAIR_SMALL = 3
DEBOUNCE_CALLS = 4
DEBOUNCE_SPACING_S = 0.2
DEBOUNCE = DebouncePlan(period_ms=1_500, max_wait_ms=30_000)
#: Seconds without a poison death before the schedule is deleted.
QUIET_S = 15.0


class FlowDriver:
    def __init__(self, seed: int, workflows: int, poison: int, window: float, actions: Actions):
        rng = random.Random(seed + 3)
        self.actions = actions
        actions.debounce_plan = DEBOUNCE
        self.plan: list[tuple[float, int, str, Any]] = []
        for burst in range(max(1, workflows // 100)):
            self._add(rng.uniform(0.1, 0.8) * window, "fair", burst)
        for burst in range(max(2, workflows // 40)):
            at = rng.uniform(0.0, 0.9) * window
            for n in range(DEBOUNCE_CALLS):
                self._add(at + n * DEBOUNCE_SPACING_S, "debounce", (f"db{burst}", n))
        for _ in range(max(2, workflows // 60)):
            self._add(rng.uniform(0.0, 0.8) * window, "trigger", None)
        for n in range(poison):
            self._add(0.25 * window + n, "poison", ("chaos-poison-act", n))
            self._add(0.45 * window + n, "poison", ("chaos-poison-body", n))
        self.plan.sort()

    def _add(self, at: float, kind: str, arg: Any) -> None:
        self.plan.append((round(at, 3), len(self.plan), kind, arg))

    def done(self) -> bool:
        return not self.plan

    def settled(self, poison_log: Path) -> bool:
        """Every poison run contained and no engine killed by one for
        ``QUIET_S``: the harness deletes the schedule only then, so the ticks a
        driver's dying holders delayed are caught up before its tail is audited
        (``check_capabilities.check_schedule``)."""
        if not self.done():
            return False
        if (
            self.actions.poison
            and WorkflowRun.objects.filter(
                workflow_id__in=list(self.actions.poison),
                status__in=("pending", "running", "parked"),
            ).exists()
        ):
            return False
        last = 0
        if poison_log.exists():
            for line in poison_log.read_text().splitlines():
                with contextlib.suppress(ValueError, KeyError, TypeError):
                    last = max(last, int(json.loads(line)["at"]))
        return wall_ms() - last >= QUIET_S * 1000

    def pump(self, now: float) -> None:
        while self.plan and self.plan[0][0] <= now:
            _, _, kind, arg = self.plan.pop(0)
            getattr(self, f"_{kind}")(arg)

    def _fair(self, burst: int) -> None:
        busy, weight = f"fair{burst}-busy", 1 + burst % 2
        starts = [(f"chaos-fair-{burst}-b{n}", busy, weight) for n in range(FAIR_BUSY)]
        starts += [(f"chaos-fair-{burst}-s{j}", f"fair{burst}-s{j}", 1) for j in range(FAIR_SMALL)]
        for workflow_id, key, w in starts:
            client.start(
                "chaos-fair", {}, workflow_id=workflow_id, fairness_key=key, fairness_weight=w
            )
            self.actions.fair[workflow_id] = (key, w)
            if key != busy:
                self.actions.fair_small.append(key)

    def _debounce(self, arg: tuple[str, int]) -> None:
        key, n = arg
        before = wall_ms()
        handle = client.debounce(
            DEBOUNCED,
            {"key": key, "n": n},
            key=key,
            period=timedelta(milliseconds=DEBOUNCE.period_ms),
            max_wait=timedelta(milliseconds=DEBOUNCE.max_wait_ms),
        )
        self.actions.debounce.append(DebounceCall(key, n, before, wall_ms(), handle.workflow_id))

    def _trigger(self, _: None) -> None:
        with contextlib.suppress(ScheduleNotFound):  # deleted already: the last starts are in
            client.trigger_schedule(chaos.SCHEDULE_ID)

    def _poison(self, arg: tuple[str, int]) -> None:
        name, n = arg
        workflow_id = f"{name}-{n}"
        client.start(name, {}, workflow_id=workflow_id)
        self.actions.poison[workflow_id] = name


__all__ = ["DEBOUNCE", "FlowDriver"]
