"""Why a claim was lost (``ownership.loss``; issue #19 part 2).

An operator's rotation (cancel, suspend, timeout, purge, force release) is
``rotated``: no renewal failure, no ``deposed``, no claim-lost warning, an
INFO line naming what happened. A takeover by another engine is still a
deposition. Each loss is counted once, whichever path notices it first.
"""

from __future__ import annotations

import logging
import warnings

import pytest

from tests.support import ManualClock, StaticHost
from weft_django.errors import EngineDeposedError
from weft_django.models import WorkflowClaim, WorkflowRun
from weft_django.ownership.batch import conditional_batch
from weft_django.ownership.fence import fenced_commit
from weft_django.ownership.loss import ClaimLoss, ReportedLosses, classify_losses
from weft_django.ownership.ops import Update
from weft_django.ownership.transitions import ClaimSnapshot, build_rotation
from weft_django.warnings import WeftWorkflowClaimLostWarning

pytestmark = pytest.mark.usefixtures("batch_db")


def _run(workflow_id: str, status: str = "running") -> WorkflowRun:
    return WorkflowRun.objects.create(workflow_id=workflow_id, name="n", status=status)


def _rotate(workflow_id: str, clock: ManualClock, *, kind: str = "rotate", reason: str = "x"):
    row = WorkflowClaim.objects.get(pk=workflow_id)
    snap = ClaimSnapshot(workflow_id, row.epoch, row.engine_id, row.expires_at, row.claimed_at)
    rotation = build_rotation(snap, actor="admin:ops", now=clock.now, reason=reason, kind=kind)
    assert conditional_batch(rotation.conditions, rotation.writes).committed


def _take_over(host: StaticHost, other: StaticHost, workflow_id: str, clock: ManualClock) -> None:
    clock.advance(host.settings.claim_ttl_ms + 3 * host.settings.claim_renew_interval_ms)
    assert other.registry is not None
    assert other.registry.takeover(workflow_id).status == "acquired"


def test_each_stop_is_classified_rotated_with_what_happened(clock: ManualClock) -> None:
    host = StaticHost("engine-a", clock)
    assert host.registry is not None
    cases = {
        "c": ("cancelled", "rotate", "cancel"),
        "s": ("suspended", "rotate", "suspend"),
        "t": ("timed_out", "rotate", "execution timeout"),
        "r": ("running", "rotate", "cancel requested"),
        "f": ("running", "force_release", "force release"),
        "p": (None, "rotate", "purge"),
    }
    for wid, (status, kind, reason) in cases.items():
        if status is not None:
            _run(wid, status)
        host.registry.acquire(wid)
        _rotate(wid, clock, kind=kind, reason=reason)
    found = classify_losses("default", dict.fromkeys(cases, 1))
    assert {wid: (loss.kind, loss.what) for wid, loss in found.items()} == {
        "c": ("rotated", "cancelled"),
        "s": ("rotated", "suspended"),
        "t": ("rotated", "timed out"),
        "r": ("rotated", "cancel requested"),
        "f": ("rotated", "force released"),
        "p": ("rotated", "purged"),
    }
    assert {loss.actor for loss in found.values()} == {"admin:ops"}


def test_a_takeover_and_an_unknown_generation_are_depositions(clock: ManualClock) -> None:
    a, b = StaticHost("engine-a", clock), StaticHost("engine-b", clock)
    assert a.registry is not None
    _run("wf")
    a.registry.acquire("wf")
    _take_over(a, b, "wf", clock)
    found = classify_losses("default", {"wf": 1, "never": 7})
    assert found["wf"] == ClaimLoss("wf", 1, "deposed", "taken over", "engine-b", "")
    assert found["never"].kind == "deposed"


def test_renewal_after_a_cancel_is_no_renewal_failure_and_no_warning(
    clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    host = StaticHost("engine-a", clock)
    assert host.registry is not None
    _run("wf", "cancelled")
    host.registry.acquire("wf")
    _rotate("wf", clock, reason="whatever the user typed")
    with warnings.catch_warnings(), caplog.at_level(logging.INFO, "weft_django"):
        warnings.simplefilter("error", WeftWorkflowClaimLostWarning)
        outcomes = host.registry.renew_all()
        # ... and the fence of a later write does not count it again.
        with pytest.raises(EngineDeposedError):
            fenced_commit(host, "wf", [], [Update(WorkflowRun, {"workflow_id": "wf"}, {})])
    assert [o.status for o in outcomes] == ["lost"]
    snap = host.metrics.snapshot()
    assert snap.renewal_failures == 0
    assert snap.attempts["deposed"] == 0
    assert snap.attempts["rotated"] == 1
    text = caplog.text
    assert 'workflow "wf" was cancelled by an operator (admin:ops)' in text
    assert "whatever the user typed" not in text
    assert "another engine" not in text
    assert all(r.levelno < logging.WARNING for r in caplog.records if r.name.startswith("weft"))


def test_renewal_after_a_takeover_is_a_renewal_failure_counted_once(clock: ManualClock) -> None:
    a, b = StaticHost("engine-a", clock), StaticHost("engine-b", clock)
    assert a.registry is not None
    _run("wf")
    a.registry.acquire("wf")
    _take_over(a, b, "wf", clock)
    with pytest.warns(WeftWorkflowClaimLostWarning) as record:
        a.registry.renew_all()
        with pytest.raises(EngineDeposedError):
            fenced_commit(a, "wf", [], [Update(WorkflowRun, {"workflow_id": "wf"}, {})])
    assert len(record) == 1  # renewal warned; the fence after it did not again
    snap = a.metrics.snapshot()
    assert snap.renewal_failures == 1
    assert snap.attempts["deposed"] == 1
    assert snap.attempts["rotated"] == 0


def test_reported_losses_dedupe_by_generation_and_stay_bounded() -> None:
    seen = ReportedLosses(limit=2)
    assert seen.add(ClaimLoss("a", 1, "rotated"))
    assert not seen.add(ClaimLoss("a", 1, "deposed"))
    assert seen.add(ClaimLoss("a", 3, "deposed"))  # a later generation: new
    seen.add(ClaimLoss("b", 1, "rotated"))
    seen.add(ClaimLoss("c", 1, "rotated"))
    assert seen.get("a") is None and seen.get("c") is not None
