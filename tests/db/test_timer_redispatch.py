"""A Celery node re-sends a sent but undriven timer at growing gaps.

Invariant protected (``transports.celery.timers``): a timer handed to
Celery is sent again while its run stays undriven -- the message may have
been lost -- one renew interval after it fell due, then after gaps that
double with how overdue it was when last sent, up to ``CAP_INTERVALS``
intervals. Re-sending every interval flooded a node whose queue ran late
(the chaos soak's minute-late wakes).
"""

from __future__ import annotations

import itertools
from types import SimpleNamespace
from typing import Any

import pytest

from weft_django.conf import get_settings
from weft_django.models import Timer, WorkflowClaim, WorkflowRun
from weft_django.transports.celery import timers
from weft_django.transports.celery.redrive import CAP_INTERVALS

pytestmark = pytest.mark.django_db

FIRE_AT = 10_000_000


def test_resends_of_an_undriven_timer_double_up_to_the_cap(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    settings = get_settings()
    interval = settings.claim_renew_interval_ms
    sent: list[int] = []
    monkeypatch.setattr(timers, "send_drive", lambda message: sent.append(clock[0]))
    clock = [FIRE_AT]
    engine: Any = SimpleNamespace(settings=settings, engine_id="node-a")
    run = WorkflowRun.objects.create(workflow_id="wf", name="n", status="parked")
    WorkflowClaim.objects.create(
        workflow_id="wf", epoch=1, engine_id="node-a", expires_at=FIRE_AT * 2, claimed_at=1
    )
    Timer.objects.create(run=run, kind="sleep", fire_at=FIRE_AT)
    runs = WorkflowRun.objects.filter(pk=run.pk)
    step = interval // 4
    for now in range(FIRE_AT, FIRE_AT + 40 * interval + 1, step):
        clock[0] = now
        timers.dispatch_timers(engine, runs, now, node_name="n@h", found_by_polling=True)
    gaps = [(b - a) // interval for a, b in itertools.pairwise(sent)]
    assert sent[0] == FIRE_AT  # due: sent at once
    assert gaps[:5] == [1, 1, 2, 4, 8]
    assert max(gaps) == CAP_INTERVALS
    assert len(sent) <= 8  # every interval would have been 41
