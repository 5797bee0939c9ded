"""The wake guard with adoption (engine scope: a Celery pool process).

Invariants protected: a pool process drives a turn only under a claim the
guard confirmed AND adopted at the epoch the message names; the decision
is not counted by ``decide_wake`` (the caller counts it once, after its own
duplicate check); a holder that changed between the check and the adopt is
a discard (warned), never a turn.
"""

from __future__ import annotations

import pytest

from tests.support import ManualClock, StaticHost
from weft_django.ownership import guard as guard_module
from weft_django.ownership.guard import decide_wake, record_wake
from weft_django.ownership.registry import ClaimRegistry
from weft_django.warnings import WeftWorkflowWakeDiscardedWarning

pytestmark = pytest.mark.django_db(transaction=True)


def _node_registry(clock: ManualClock, settings) -> ClaimRegistry:
    return ClaimRegistry(
        engine_id="node-1",
        clock=clock,
        claim_ttl_ms=settings.claim_ttl_ms,
        claim_renew_interval_ms=settings.claim_renew_interval_ms,
        renew_scope="engine",
    )


def _pool_host(clock: ManualClock) -> StaticHost:
    settings = StaticHost("x", clock).settings
    return StaticHost("node-1", clock, registry=_node_registry(clock, settings))


def test_a_sibling_claim_is_confirmed_and_adopted_uncounted(clock: ManualClock) -> None:
    host = _pool_host(clock)
    _node_registry(clock, host.settings).acquire("wf")  # a sibling pool process
    verdict = decide_wake(host, "wf", "signal", 1, expected_engine_id="node-1", adopt=True)
    assert verdict.decision == "proceed" and verdict.holder is not None
    assert verdict.holder.epoch == 1
    assert host.registry.current_epoch("wf") == 1  # tracked: the turn's writes carry it
    assert host.metrics.snapshot().wakes == {}
    record_wake(host, "signal", verdict.decision, "celery")
    assert dict(host.metrics.snapshot().wakes) == {("signal", "proceed", "celery"): 1}


def test_another_engine_or_epoch_is_discarded_with_its_reason(clock: ManualClock) -> None:
    host = _pool_host(clock)
    _node_registry(clock, host.settings).acquire("wf")
    with pytest.warns(WeftWorkflowWakeDiscardedWarning):
        other = decide_wake(host, "wf", "sleep", 1, expected_engine_id="node-2", adopt=True)
    assert (other.decision, other.reason, other.holder) == ("discard", "other-engine", None)
    with pytest.warns(WeftWorkflowWakeDiscardedWarning):
        stale = decide_wake(host, "wf", "sleep", 2, expected_engine_id="node-1", adopt=True)
    assert (stale.decision, stale.reason) == ("discard", "generation-mismatch")
    assert host.registry.current_epoch("wf") is None  # nothing adopted


def test_a_holder_that_changed_after_a_failed_read_is_not_adopted(
    clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    host = _pool_host(clock)  # nobody holds "wf"
    real_check = guard_module.wake_ownership_check
    calls = []

    def blip_once(**kwargs):
        calls.append(kwargs)
        if len(calls) == 1:
            raise guard_module.WorkflowClaim.DoesNotExist("a read blip")
        return real_check(**kwargs)

    monkeypatch.setattr(guard_module, "wake_ownership_check", blip_once)
    with pytest.warns(WeftWorkflowWakeDiscardedWarning) as record:
        verdict = decide_wake(host, "wf", "sleep", 1, expected_engine_id="node-1", adopt=True)
    assert (verdict.decision, verdict.reason) == ("discard", "holder-absent")
    assert record[0].message.workflow_id == "wf"
    assert host.registry.current_epoch("wf") is None
